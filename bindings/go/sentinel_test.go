package redlock_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	redlock "github.com/redlock-quorum/redlock/bindings/go"
)

// startSentinel starts a redis-server --sentinel on a free loopback port watching service at
// 127.0.0.1:masterPort (quorum 1), with requirepass password unless it is empty; killed by PID
// when the test ends. It waits (bounded) until the sentinel answers.
func startSentinel(t *testing.T, service string, masterPort int, password string) int {
	t.Helper()
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		dir, err := os.MkdirTemp(testRoot, "sentinel-"+strconv.Itoa(port)+"-")
		if err != nil {
			t.Fatal(err)
		}
		conf := fmt.Sprintf("port %d\nbind 127.0.0.1\ndaemonize no\ndir %s\nlogfile %s\n"+
			"sentinel monitor %s 127.0.0.1 %d 1\n", port, dir, filepath.Join(dir, "sentinel.log"), service, masterPort)
		if password != "" {
			conf += "requirepass " + password + "\n"
		}
		path := filepath.Join(dir, "sentinel.conf")
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(redisServerProgram, path, "--sentinel")
		if err := startProcess(cmd); err != nil {
			t.Fatalf("redis-server --sentinel: %v", err)
		}
		done := make(chan struct{})
		go func() {
			_ = cmd.Wait()
			close(done)
		}()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-done
		})
		addr := "127.0.0.1:" + strconv.Itoa(port)
		up := eventually(10*time.Second, func() bool {
			select {
			case <-done:
				return true // exited (the port was taken?): tried again below
			default:
			}
			_, err := respDo(addr, "PING")
			return err == nil || strings.Contains(err.Error(), "NOAUTH")
		})
		select {
		case <-done:
			continue
		default:
		}
		if up {
			return port
		}
	}
	t.Fatal("could not start a sentinel after 5 attempts")
	return 0
}

// A lock through a failover group (redis+sentinel://): the group alone, so that its answer
// decides; and a sentinel with requirepass, reachable only with WithSentinelAuth.
func TestFailoverGroup(t *testing.T) {
	t.Parallel()
	master := startCluster(t, 1)[0]
	open := startSentinel(t, "svc", master.port, "")
	locked := startSentinel(t, "svc", master.port, "s3cret")
	group := func(port int) string { return fmt.Sprintf("redis+sentinel://127.0.0.1:%d/svc", port) }

	m, err := redlock.New([]string{group(open)}, redlock.WithRetry(0, 0))
	wantNoErr(t, "New", err)
	defer m.Close()
	res := uniq(t)
	l, err := m.TryLock(res, 10*time.Second)
	wantNoErr(t, "TryLock through the group", err)
	if o := l.NodeOutcomes(); len(o) != 1 || o[0] != redlock.NodeSuccess {
		t.Fatalf("NodeOutcomes() = %v", o)
	}
	if v, _ := master.do("GET", lockKey(res)); v != l.Value() {
		t.Fatalf("the master holds %v, want the lock's value %q", v, l.Value())
	}
	wantNoErr(t, "Unlock", l.Unlock())
	l.Free()

	// Without the sentinels' password: not found, and the error says why.
	noAuth, err := redlock.New([]string{group(locked)}, redlock.WithRetry(0, 0))
	wantNoErr(t, "New", err)
	defer noAuth.Close()
	_, err = noAuth.TryLock(res, 10*time.Second)
	if !errors.Is(err, redlock.ErrUnavailable) || !strings.Contains(err.Error(), "failover group") ||
		!strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("TryLock without the sentinels' password: %v", err)
	}
	withAuth, err := redlock.New([]string{group(locked)}, redlock.WithRetry(0, 0), redlock.WithSentinelAuth("", "s3cret"))
	wantNoErr(t, "New", err)
	defer withAuth.Close()
	l, err = withAuth.TryLock(res, 10*time.Second)
	wantNoErr(t, "TryLock with the sentinels' password", err)
	wantNoErr(t, "Unlock", l.Unlock())
	l.Free()
}

// The failover-group options' input errors, and the new outcomes' names.
func TestFailoverGroupOptions(t *testing.T) {
	t.Parallel()
	url := "redis+sentinel://127.0.0.1:26379/svc"
	for name, opt := range map[string]redlock.Option{
		"empty password":  redlock.WithSentinelAuth("alice", ""),
		"NUL":             redlock.WithSentinelAuth("a\x00", "pw"),
		"no replica":      redlock.WithReplicaAcks(0, time.Second),
		"no timeout":      redlock.WithReplicaAcks(1, 0),
		"negative":        redlock.WithReplicaAcks(-1, time.Second),
		"timeout too big": redlock.WithReplicaAcks(1, time.Duration(1<<62)),
	} {
		if _, err := redlock.New([]string{url}, opt); !errors.Is(err, redlock.ErrInvalidArgument) {
			t.Errorf("%s: New returned %v, want ErrInvalidArgument", name, err)
		}
	}
	if _, err := redlock.New([]string{"redis+sentinel://127.0.0.1:26379"}); !errors.Is(err, redlock.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "SERVICE") {
		t.Errorf("a sentinel URL without its service: %v", err)
	}
	m, err := redlock.New([]string{url, "redis://127.0.0.1:7000?durable=true"},
		redlock.WithSentinelAuth("alice", "pw"), redlock.WithReplicaAcks(1, 100*time.Millisecond))
	wantNoErr(t, "New with the failover-group options", err)
	m.Close()
	if redlock.NodeSentinel.String() != "sentinel" || redlock.NodeUnacknowledged.String() != "unacknowledged" ||
		redlock.QuarantinePromoted.String() != "promoted" {
		t.Errorf("names: %v %v %v", redlock.NodeSentinel, redlock.NodeUnacknowledged, redlock.QuarantinePromoted)
	}
}
