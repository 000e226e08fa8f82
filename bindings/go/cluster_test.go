package redlock_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	redlock "github.com/redlock-quorum/redlock/bindings/go"
)

// startOneShardClusters starts n Redis Clusters of one primary each (--cluster-enabled yes,
// CLUSTER ADDSLOTSRANGE 0 16383), killed by PID when the test ends, and waits (bounded) until
// each says cluster_state:ok. Returns their servers.
func startOneShardClusters(t *testing.T, n int) []*redisServer {
	t.Helper()
	servers := make([]*redisServer, 0, n)
	for i := 0; i < n; i++ {
		bus, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		servers = append(servers, startCluster(t, 1, "--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(bus))...)
	}
	for _, s := range servers {
		if _, err := s.do("CLUSTER", "ADDSLOTSRANGE", "0", "16383"); err != nil {
			t.Fatalf("CLUSTER ADDSLOTSRANGE: %v", err)
		}
		ok := eventually(30*time.Second, func() bool {
			v, err := s.do("CLUSTER", "INFO")
			return err == nil && strings.Contains(fmt.Sprint(v), "cluster_state:ok")
		})
		if !ok {
			t.Fatal("the cluster did not become ready within 30 s")
		}
	}
	return servers
}

// A lock where each node is a Redis Cluster (redis+cluster://), restart quarantine on; a
// cluster URL without a seed is refused.
func TestClusterNodes(t *testing.T) {
	t.Parallel()
	servers := startOneShardClusters(t, 3)
	urls := make([]string, len(servers))
	for i, s := range servers {
		urls[i] = "redis+cluster://" + s.addr()
	}
	if _, err := redlock.New([]string{"redis+cluster://"}); !errors.Is(err, redlock.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "seed") {
		t.Fatalf("New with a cluster URL without a seed: %v", err)
	}
	// Restart quarantine on (per shard), as by default.
	m, err := redlock.New(urls, redlock.WithRetry(3, 50*time.Millisecond))
	wantNoErr(t, "New", err)
	defer m.Close()
	res := uniq(t)
	l, err := m.TryLock(res, 10*time.Second)
	wantNoErr(t, "TryLock on cluster nodes", err)
	granted := 0
	for _, o := range l.NodeOutcomes() {
		if o == redlock.NodeSuccess {
			granted++
		} else if o != redlock.NodePending {
			t.Fatalf("NodeOutcomes() = %v", l.NodeOutcomes())
		}
	}
	held := 0
	for _, s := range servers {
		if v, _ := s.do("GET", lockKey(res)); v == l.Value() {
			held++
		}
	}
	if granted < 2 || held < 2 {
		t.Fatalf("granted on %d, held on %d clusters", granted, held)
	}
	if _, err := m.TryLock(res, 10*time.Second); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("a second TryLock: %v", err)
	}
	wantNoErr(t, "Unlock", l.Unlock())
	l.Free()
}
