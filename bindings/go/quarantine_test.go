package redlock_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	redlock "github.com/redlock-quorum/redlock/bindings/go"
)

// Restart quarantine against servers the tests start. Each node holds a marker (the key
// redlock-marker, with its run_id) written only while it is trusted: a brand-new cluster is
// trusted at once; a node that restarted or lost its keyspace does not count toward a quorum
// until the maximum TTL has passed.
//
// Every wait is bounded below by what safety requires (a node never counts again before the
// maximum TTL after its loss, measured from a time taken before the loss) and above
// generously, so that a loaded machine cannot fail a test. Where a test checks why a node is
// quarantined, the quarantine lasts the default 60 s, so that no slow handshake can see it
// end first; where it checks when a node counts again, the maximum TTL is 3 s.

// shortMaxTTL is the maximum TTL of the tests that wait for a quarantine to end.
const shortMaxTTL = 3 * time.Second

// quarantineManager makes a manager with restart quarantine as by default, the tests' I/O
// timeouts, a 20 ms retry delay, and maxTTL as its maximum TTL (0: the default, 60 s).
func quarantineManager(t testing.TB, nodes []string, maxTTL time.Duration) *redlock.Manager {
	t.Helper()
	opts := []redlock.Option{redlock.WithRetry(0, 20*time.Millisecond)}
	if maxTTL > 0 {
		opts = append(opts, redlock.WithMaxTTL(maxTTL))
	}
	return newManager(t, nodes, opts...)
}

// probeTTL is the TTL of probes: within every maximum TTL used here.
const probeTTL = 2 * time.Second

// probe makes one acquisition (TryLock) of a resource of its own, releases it (best effort),
// and returns node i's outcome, or the acquisition's error.
func probe(t testing.TB, m *redlock.Manager, i int) (redlock.NodeOutcome, error) {
	l, err := m.TryLock(uniq(t), probeTTL)
	if err != nil {
		return 0, err
	}
	defer l.Free()
	o := l.NodeOutcomes()[i]
	_ = l.Unlock()
	return o, nil
}

// unseen reports whether an outcome says nothing of node's handshake: the connection was
// lost or is being re-established, or the round was decided before the node answered.
func unseen(o redlock.NodeOutcome) bool {
	switch o {
	case redlock.NodeUnreachable, redlock.NodeBackoff, redlock.NodePending, redlock.NodeTimeout:
		return true
	}
	return false
}

// seenOutcome probes until node i's outcome says something of it (see unseen): the manager
// has (re)connected and read the node's handshake. At most 30 s.
func seenOutcome(t testing.TB, m *redlock.Manager, i int) redlock.NodeOutcome {
	t.Helper()
	var last []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		o, err := probe(t, m, i)
		if err == nil && !unseen(o) {
			return o
		}
		if err != nil {
			last = append(last, err.Error())
		} else {
			last = append(last, o.String())
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d's handshake was never read; last outcomes or errors: %q", i, last[max(0, len(last)-5):])
		}
	}
}

// checkQuarantined checks that m has node i quarantined for reason, for at most maxTTL (plus
// a second: uptimes are whole seconds) and for at least the maximum TTL after the loss, which
// happened after lost.
func checkQuarantined(t testing.TB, who string, m *redlock.Manager, i int, reason redlock.QuarantineReason,
	maxTTL time.Duration, lost time.Time) {
	t.Helper()
	states, err := m.NodeStates()
	wantNoErr(t, "NodeStates", err)
	elapsed := time.Since(lost) // read after the states: at least their age
	s := states[i]
	if !s.Quarantined || s.Reason != reason {
		t.Fatalf("%s: NodeStates()[%d] = %+v, want quarantined (%v)", who, i, s, reason)
	}
	if s.Remaining < maxTTL-elapsed-5*time.Millisecond || s.Remaining > maxTTL+time.Second {
		t.Fatalf("%s: node %d quarantined for another %v, %v after its loss; want [%v − that, %v]",
			who, i, s.Remaining, elapsed, maxTTL, maxTTL+time.Second)
	}
	for j, s := range states {
		if j != i && (s.Quarantined || s.Remaining != 0 || s.Reason != redlock.QuarantineNone) {
			t.Fatalf("%s: NodeStates()[%d] = %+v: only node %d lost its keys", who, j, s, i)
		}
	}
}

// checkMarkers waits (at most 10 s) until every server's marker holds its current run_id.
func checkMarkers(t testing.TB, servers []*redisServer) {
	t.Helper()
	for i, s := range servers {
		id := s.runID(t)
		if !eventually(10*time.Second, func() bool { m, ok := s.marker(t); return ok && m == id }) {
			m, ok := s.marker(t)
			t.Fatalf("node %d's marker is %q (present: %v), want its run_id %q", i, m, ok, id)
		}
	}
}

// A brand-new cluster (no markers, every node young and answering) is trusted at once: with
// the default configuration the first TryLock succeeds, and every node's marker then holds
// its run_id. A second manager trusts the nodes from their markers in its first attempt.
func TestQuarantineFreshCluster(t *testing.T) {
	t.Parallel()
	servers := startCluster(t, 3)
	nodes := urls(servers)
	for i, s := range servers {
		if m, ok := s.marker(t); ok {
			t.Fatalf("node %d has a marker (%q) before any manager saw it", i, m)
		}
	}

	// The default configuration (quarantine on, 60 s maximum TTL, no retries needed), with
	// the tests' generous I/O timeouts. (No newManager: nothing else added.)
	m, err := redlock.New(nodes, testTimeouts)
	wantNoErr(t, "New", err)
	t.Cleanup(func() { m.Close() })
	states, err := m.NodeStates()
	wantNoErr(t, "NodeStates before any connection", err)
	for i, s := range states {
		if s != (redlock.NodeState{Index: i}) {
			t.Fatalf("before any connection, NodeStates()[%d] = %+v, want not quarantined", i, s)
		}
	}

	res := uniq(t)
	l, err := m.TryLock(res, 10*time.Second)
	wantNoErr(t, "the first TryLock on a brand-new cluster, with the default configuration", err)
	defer l.Free()
	if g := l.Granted(); g < m.Quorum() {
		t.Fatalf("Granted() = %d", g)
	}
	for i, o := range l.NodeOutcomes() {
		if o != redlock.NodeSuccess && o != redlock.NodePending {
			t.Fatalf("node %d: outcome %v (all: %v)", i, o, l.NodeOutcomes())
		}
	}
	if n := holding(t, nodes, res, l.Value()); n < m.Quorum() {
		t.Fatalf("%d nodes hold the token", n)
	}
	wantNoErr(t, "Unlock", l.Unlock())

	checkMarkers(t, servers)
	states, err = m.NodeStates()
	wantNoErr(t, "NodeStates", err)
	for i, s := range states {
		if s != (redlock.NodeState{Index: i}) {
			t.Fatalf("NodeStates()[%d] = %+v on a brand-new cluster, want trusted", i, s)
		}
	}

	// A manager that knows nothing of the nodes trusts them from their markers, at once.
	other, err := redlock.New(nodes, testTimeouts)
	wantNoErr(t, "New", err)
	t.Cleanup(func() { other.Close() })
	l2, err := other.TryLock(res, 10*time.Second, redlock.Fenced())
	wantNoErr(t, "a new manager's first TryLock on the marked cluster", err)
	defer l2.Free()
	for i, o := range l2.NodeOutcomes() {
		if o != redlock.NodeSuccess && o != redlock.NodePending {
			t.Fatalf("new manager: node %d: outcome %v (all: %v)", i, o, l2.NodeOutcomes())
		}
	}
	if a := metric(t, other, "redlock_acquire_attempts_total"); a != 1 {
		t.Fatalf("the new manager made %d attempts, want 1", a)
	}
	wantNoErr(t, "Unlock", l2.Unlock())

	// A lock TTL above the manager's maximum TTL is refused before anything is sent.
	_, err = m.TryLock(res, redlock.DefaultMaxTTL+time.Millisecond)
	wantIs(t, "TryLock(DefaultMaxTTL + 1ms)", err, redlock.ErrInvalidArgument)
}

// A way for node 0 to lose its keys, and the reasons it is then quarantined for.
type keyLoss struct {
	// extra are the servers' arguments (persistence).
	extra []string
	// lose makes the server lose its keys.
	lose func(t *testing.T, s *redisServer)
	// running is the reason of a manager that knew the node before; fresh, of a new one.
	running, fresh redlock.QuarantineReason
	// staleMarker: the node keeps its marker (now stale) rather than losing it.
	staleMarker bool
}

var (
	// SIGKILL and a start on the same port, no persistence: back empty, with a new run_id.
	restartedEmpty = keyLoss{
		lose:    func(t *testing.T, s *redisServer) { s.restart(t) },
		running: redlock.QuarantineRestartSeen, fresh: redlock.QuarantineNoMarker,
	}
	// FLUSHALL: no restart, the same connections; the marker is gone with the rest.
	flushed = keyLoss{
		lose:    func(t *testing.T, s *redisServer) { s.flushAll(t) },
		running: redlock.QuarantineNoMarker, fresh: redlock.QuarantineNoMarker,
	}
	// SIGKILL and a restart from an AOF fsynced on every write: nothing lost, marker
	// included, but the client cannot verify that, so it is quarantined all the same.
	restartedFromAOF = keyLoss{
		extra:   []string{"--appendonly", "yes", "--appendfsync", "always"},
		lose:    func(t *testing.T, s *redisServer) { s.restart(t) },
		running: redlock.QuarantineRestartSeen, fresh: redlock.QuarantineStaleMarker, staleMarker: true,
	}
)

// testLossReasons: after node 0 loses its keys, the manager that knew it and a new one both
// quarantine it, for the right reason and for about the (default, 60 s) maximum TTL; its
// grants do not count (the lock is held by nodes 1 and 2 alone); and nobody writes its marker
// meanwhile.
func testLossReasons(t *testing.T, loss keyLoss) {
	t.Parallel()
	servers := startCluster(t, 3, loss.extra...)
	nodes := urls(servers)
	m := quarantineManager(t, nodes, 0)
	if o := seenOutcome(t, m, 0); o != redlock.NodeSuccess {
		t.Fatalf("node 0 of a brand-new cluster: outcome %v", o)
	}
	checkMarkers(t, servers)
	oldID := servers[0].runID(t)

	lost := time.Now()
	loss.lose(t, servers[0])
	restarted := servers[0].runID(t) != oldID
	switch marker, ok := servers[0].marker(t); {
	case loss.staleMarker && (!ok || marker != oldID || !restarted):
		t.Fatalf("restarted from its AOF, node 0 has run_id %q and marker %q (present: %v), want the old run_id %q",
			servers[0].runID(t), marker, ok, oldID)
	case !loss.staleMarker && ok:
		t.Fatalf("node 0 kept its marker %q", marker)
	}

	if o := seenOutcome(t, m, 0); o != redlock.NodeQuarantined {
		t.Fatalf("the running manager: node 0's outcome %v after its loss, want %v", o, redlock.NodeQuarantined)
	}
	checkQuarantined(t, "the running manager", m, 0, loss.running, redlock.DefaultMaxTTL, lost)

	// Its grants do not count: a lock is held by the two others, and not on node 0. (LockWait:
	// should an attempt fail on a loaded machine, another follows.)
	res := uniq(t)
	l, err := m.LockWait(res, 10*time.Second, 30*time.Second)
	wantNoErr(t, "LockWait with node 0 quarantined", err)
	defer l.Free()
	if o := l.NodeOutcomes(); l.Granted() != 2 || o[0] != redlock.NodeQuarantined {
		t.Fatalf("Granted() = %d, NodeOutcomes() = %v with node 0 quarantined", l.Granted(), o)
	}
	if n := holding(t, nodes[1:], res, l.Value()); n != 2 {
		t.Fatalf("%d of the other nodes hold the token", n)
	}
	if !eventually(5*time.Second, func() bool { return present(t, nodes[:1], res) == 0 }) {
		t.Fatal("the quarantined node keeps the lock's key")
	}
	wantNoErr(t, "Unlock", l.Unlock())

	// A manager that never saw node 0 before tells the loss from the markers.
	fresh := quarantineManager(t, nodes, 0)
	if o := seenOutcome(t, fresh, 0); o != redlock.NodeQuarantined {
		t.Fatalf("a new manager: node 0's outcome %v after its loss, want %v", o, redlock.NodeQuarantined)
	}
	checkQuarantined(t, "a new manager", fresh, 0, loss.fresh, redlock.DefaultMaxTTL, lost)

	// Nobody trusts node 0, so nobody wrote its marker.
	switch marker, ok := servers[0].marker(t); {
	case loss.staleMarker && marker != oldID, !loss.staleMarker && ok:
		t.Fatalf("node 0's marker was written while it was quarantined: %q", marker)
	}
}

// watchQuarantine probes m until node i counts again (at most 30 s after lost) and returns how
// many times it was seen quarantined first. Seen before lost + maxTTL, the node must be
// quarantined, and while NodeStates says it is, for reason. Safe to call from a goroutine: it
// returns failures rather than stopping the test.
func watchQuarantine(t testing.TB, m *redlock.Manager, i int, reason redlock.QuarantineReason,
	maxTTL time.Duration, lost time.Time) (quarantined int, err error) {
	for deadline := lost.Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return quarantined, fmt.Errorf("node %d never counted again", i)
		}
		o, perr := probe(t, m, i)
		if perr != nil || unseen(o) {
			continue
		}
		switch o {
		case redlock.NodeSuccess:
			// Decided during the probe, which has returned: no later than now.
			if since := time.Since(lost); since < maxTTL {
				return quarantined, fmt.Errorf("node %d counted again %v after its loss, before the maximum TTL (%v)",
					i, since, maxTTL)
			}
			return quarantined, nil
		case redlock.NodeQuarantined:
			quarantined++
			states, err := m.NodeStates()
			if err != nil {
				return quarantined, err
			}
			if s := states[i]; s.Quarantined && s.Reason != reason {
				return quarantined, fmt.Errorf("node %d quarantined for %v, want %v", i, s.Reason, reason)
			}
		default:
			return quarantined, fmt.Errorf("node %d's outcome %v", i, o)
		}
	}
}

// testLossTiming: with a 3 s maximum TTL, the manager that knew node 0 and one made right
// after its loss both count it again only once the maximum TTL has passed since the loss
// (and within 30 s); its marker then holds its run_id.
func testLossTiming(t *testing.T, loss keyLoss) {
	t.Parallel()
	servers := startCluster(t, 3, loss.extra...)
	nodes := urls(servers)
	m := quarantineManager(t, nodes, shortMaxTTL)
	if o := seenOutcome(t, m, 0); o != redlock.NodeSuccess {
		t.Fatalf("node 0 of a brand-new cluster: outcome %v", o)
	}
	checkMarkers(t, servers)

	lost := time.Now()
	loss.lose(t, servers[0])
	fresh := quarantineManager(t, nodes, shortMaxTTL)

	// Both at once: the first to end the quarantine writes the marker, which the other reads.
	var wg sync.WaitGroup
	for _, w := range []struct {
		who    string
		m      *redlock.Manager
		reason redlock.QuarantineReason
	}{{"the running manager", m, loss.running}, {"a new manager", fresh, loss.fresh}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := watchQuarantine(t, w.m, 0, w.reason, shortMaxTTL, lost)
			if err != nil {
				t.Errorf("%s: %v", w.who, err)
				return
			}
			t.Logf("%s: node 0 seen quarantined %d times, counted again %v after its loss", w.who, n, time.Since(lost))
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	checkMarkers(t, servers)
	for who, mgr := range map[string]*redlock.Manager{"the running manager": m, "a new manager": fresh} {
		states, err := mgr.NodeStates()
		wantNoErr(t, "NodeStates", err)
		if s := states[0]; s != (redlock.NodeState{Index: 0}) {
			t.Fatalf("%s: NodeStates()[0] = %+v after the quarantine", who, s)
		}
	}
}

// A node killed and started again empty: RestartSeen for the manager that saw it restart,
// NoMarker for a new one; it counts again only after the maximum TTL.
func TestQuarantineRestartedNode(t *testing.T) {
	t.Parallel()
	t.Run("reasons", func(t *testing.T) { testLossReasons(t, restartedEmpty) })
	t.Run("counts again", func(t *testing.T) { testLossTiming(t, restartedEmpty) })
}

// FLUSHALL on a running node: its marker is gone, the next grant finds out (NoMarker, for
// every manager), and it counts again only after the maximum TTL.
func TestQuarantineFlushAll(t *testing.T) {
	t.Parallel()
	t.Run("reasons", func(t *testing.T) { testLossReasons(t, flushed) })
	t.Run("counts again", func(t *testing.T) { testLossTiming(t, flushed) })
}

// A node restarted from an AOF fsynced on every write keeps its marker, with its earlier
// run_id: StaleMarker for a new manager, RestartSeen for the one that saw it restart.
func TestQuarantineStaleMarker(t *testing.T) {
	t.Parallel()
	t.Run("reasons", func(t *testing.T) { testLossReasons(t, restartedFromAOF) })
	t.Run("counts again", func(t *testing.T) { testLossTiming(t, restartedFromAOF) })
}

// nodeSegment returns the part of an error message about node i ("node i (addr): …").
func nodeSegment(msg string, i int, addr string) string {
	prefix := fmt.Sprintf("node %d (%s): ", i, addr)
	start := strings.Index(msg, prefix)
	if start < 0 {
		return ""
	}
	seg := msg[start:]
	if end := strings.Index(seg[len(prefix):], "; node "); end >= 0 {
		seg = seg[:len(prefix)+end]
	}
	return seg
}

// A restarted majority: no lock, and the error names each restarted node, its quarantine and
// why, for the manager that saw the restarts ("restart seen") and for a new one ("no
// marker"). With a 3 s maximum TTL, locks are to be had again once it has passed.
func TestQuarantineRestartedMajority(t *testing.T) {
	t.Parallel()
	t.Run("unavailable", func(t *testing.T) {
		t.Parallel()
		servers := startCluster(t, 3)
		nodes := urls(servers)
		m := quarantineManager(t, nodes, 0)
		for i := range servers {
			if o := seenOutcome(t, m, i); o != redlock.NodeSuccess {
				t.Fatalf("node %d of a brand-new cluster: outcome %v", i, o)
			}
		}
		checkMarkers(t, servers)
		servers[0].restart(t)
		servers[1].restart(t)
		fresh := quarantineManager(t, nodes, 0)
		var tried []string // a resource of its own per attempt: no attempt meets another's key
		for _, c := range []struct {
			who    string
			m      *redlock.Manager
			why    string
			reason redlock.QuarantineReason
		}{
			{"the running manager", m, "(restart seen: its run_id changed)", redlock.QuarantineRestartSeen},
			{"a new manager", fresh, "(no marker: it restarted empty or its data was flushed, or it is new", redlock.QuarantineNoMarker},
		} {
			var msg string
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				tried = append(tried, uniq(t))
				l, err := c.m.TryLock(tried[len(tried)-1], 10*time.Second)
				if l != nil {
					t.Fatalf("%s: acquired a lock with a restarted majority (outcomes %v)", c.who, l.NodeOutcomes())
				}
				wantIs(t, c.who+": TryLock with a restarted majority", err, redlock.ErrUnavailable)
				msg = err.Error()
				told := true
				for i := 0; i < 2; i++ {
					seg := nodeSegment(msg, i, servers[i].addr())
					told = told && strings.Contains(seg, ": in restart quarantine for another ") &&
						strings.Contains(seg, c.why)
				}
				if told {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: the error never named both restarted nodes' quarantine %s: %q", c.who, c.why, msg)
				}
			}
			t.Logf("%s: %s", c.who, msg)
			if !strings.Contains(msg, "0/3 granted") && !strings.Contains(msg, "1/3 granted") {
				t.Fatalf("%s: %q", c.who, msg)
			}
			states, err := c.m.NodeStates()
			wantNoErr(t, "NodeStates", err)
			for i, s := range states {
				want := redlock.NodeState{Index: i}
				if i < 2 {
					want.Quarantined, want.Reason, want.Remaining = true, c.reason, s.Remaining
				}
				if s != want || (i < 2 && s.Remaining <= 0) {
					t.Fatalf("%s: NodeStates()[%d] = %+v", c.who, i, s)
				}
			}
		}
		for _, res := range tried {
			if !eventually(5*time.Second, func() bool { return present(t, nodes, res) == 0 }) {
				t.Fatal("a failed acquisition left its key")
			}
		}
	})
	t.Run("available after the maximum TTL", func(t *testing.T) {
		t.Parallel()
		servers := startCluster(t, 3)
		nodes := urls(servers)
		m := quarantineManager(t, nodes, shortMaxTTL)
		for i := range servers {
			if o := seenOutcome(t, m, i); o != redlock.NodeSuccess {
				t.Fatalf("node %d of a brand-new cluster: outcome %v", i, o)
			}
		}
		lost := time.Now()
		servers[0].restart(t)
		servers[1].restart(t)
		l, err := m.LockWait(uniq(t), probeTTL, 30*time.Second)
		wantNoErr(t, "LockWait after a majority restart", err)
		defer l.Free()
		if since := time.Since(lost); since < shortMaxTTL {
			t.Fatalf("a lock %v after a majority restart, before the maximum TTL (%v)", since, shortMaxTTL)
		}
		wantNoErr(t, "Unlock", l.Unlock())
	})
}

// A quarantined node plus a dead one leave no quorum: the error names the quarantined node and
// why, and nothing is granted.
func TestQuarantinePlusDeadNode(t *testing.T) {
	t.Parallel()
	servers := startCluster(t, 3)
	nodes := urls(servers)
	m := quarantineManager(t, nodes, 0)
	for i := range servers {
		if o := seenOutcome(t, m, i); o != redlock.NodeSuccess {
			t.Fatalf("node %d of a brand-new cluster: outcome %v", i, o)
		}
	}
	servers[0].restart(t)
	servers[2].kill()
	var tried []string // a resource of its own per attempt: no attempt meets another's key
	var msg string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		tried = append(tried, uniq(t))
		l, err := m.TryLock(tried[len(tried)-1], 10*time.Second)
		if l != nil {
			t.Fatalf("acquired a lock with a node quarantined and one dead (outcomes %v)", l.NodeOutcomes())
		}
		wantIs(t, "TryLock", err, redlock.ErrUnavailable)
		msg = err.Error()
		if seg := nodeSegment(msg, 0, servers[0].addr()); strings.Contains(seg, ": in restart quarantine for another ") &&
			strings.Contains(seg, "restart seen") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the error never named node 0's quarantine: %q", msg)
		}
	}
	for _, res := range tried {
		if !eventually(5*time.Second, func() bool { return present(t, nodes[:2], res) == 0 }) {
			t.Fatal("a failed acquisition left its key")
		}
	}
}

// A fresh cluster with a node down at the first contact: no node has a marker and not every
// node has answered, so the live ones are undecided, and count once the maximum TTL has
// passed since they were first seen. The node that was down then comes back empty: it has no
// marker while the others do.
func TestQuarantineNodeDownAtFirstContact(t *testing.T) {
	t.Parallel()
	servers := startCluster(t, 3)
	nodes := urls(servers)
	servers[2].kill()
	m := quarantineManager(t, nodes, shortMaxTTL)
	first := time.Now()
	res := uniq(t)
	for deadline := first.Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		l, err := m.TryLock(res, probeTTL)
		if err == nil { // only once the maximum TTL has passed (a very slow machine)
			l.Free()
			if since := time.Since(first); since < shortMaxTTL {
				t.Fatalf("acquired %v after the first contact with a node down, outcomes %v", since, l.NodeOutcomes())
			}
			t.Logf("the maximum TTL passed before a handshake was read: the undecided state was not seen")
			break
		}
		wantIs(t, "TryLock with a node down at the first contact", err, redlock.ErrUnavailable)
		if !strings.Contains(err.Error(), "not every node has answered") {
			// A handshake not read yet (a timeout on a loaded machine): try again.
			if time.Now().After(deadline) {
				t.Fatalf("the error never said why: %q", err)
			}
			continue
		}
		states, err := m.NodeStates()
		wantNoErr(t, "NodeStates", err)
		undecided := 0
		for i, s := range states[:2] {
			switch {
			case s.Quarantined && s.Reason == redlock.QuarantineUndecided:
				undecided++
			case s.Quarantined:
				t.Fatalf("NodeStates()[%d] = %+v, want undecided", i, s)
			}
		}
		if undecided == 0 && time.Since(first) < shortMaxTTL {
			t.Fatalf("NodeStates() = %+v, want the live nodes undecided", states)
		}
		break
	}
	l, err := m.LockWait(res, probeTTL, 30*time.Second)
	wantNoErr(t, "LockWait with a node down", err)
	defer l.Free()
	if since := time.Since(first); since < shortMaxTTL {
		t.Fatalf("the undecided nodes counted %v after they were first seen, before the maximum TTL (%v)", since, shortMaxTTL)
	}
	wantNoErr(t, "Unlock", l.Unlock())
	checkMarkers(t, servers[:2])

	lost := time.Now()
	servers[2].restart(t)
	if o := seenOutcome(t, m, 2); o != redlock.NodeQuarantined {
		t.Fatalf("node 2, back empty: outcome %v", o)
	}
	states, err := m.NodeStates()
	wantNoErr(t, "NodeStates", err)
	if s := states[2]; s.Quarantined && s.Reason != redlock.QuarantineNoMarker {
		t.Fatalf("NodeStates()[2] = %+v, want quarantined (no marker)", s)
	}
	if _, err := watchQuarantine(t, m, 2, redlock.QuarantineNoMarker, shortMaxTTL, lost); err != nil {
		t.Fatal(err)
	}
}

// waitAge sleeps until at least age has passed since born.
func waitAge(born time.Time, age time.Duration) {
	if d := age - time.Since(born); d > 0 {
		time.Sleep(d)
	}
}

// A running cluster meeting the library for the first time (no markers, nodes older than the
// maximum TTL) is trusted, except a node that started less than the maximum TTL ago (Young),
// which counts once it is that old.
func TestQuarantineYoungNode(t *testing.T) {
	t.Parallel()
	const maxTTL = 2 * time.Second
	servers := startCluster(t, 3)
	born := time.Now() // every server started before this
	// Up for longer than the maximum TTL (uptimes are whole seconds), and no markers: a
	// running cluster new to this library. Node 0 then restarts.
	waitAge(born, maxTTL+1200*time.Millisecond)
	lost := time.Now()
	servers[0].restart(t)
	m := quarantineManager(t, urls(servers), maxTTL)
	l, err := m.LockWait(uniq(t), time.Second, 30*time.Second)
	wantNoErr(t, "LockWait on old nodes", err)
	defer l.Free()
	o := l.NodeOutcomes()
	if o[1] != redlock.NodeSuccess || o[2] != redlock.NodeSuccess {
		t.Fatalf("the old nodes' outcomes: %v", o)
	}
	switch {
	case o[0] == redlock.NodeQuarantined:
		states, err := m.NodeStates()
		wantNoErr(t, "NodeStates", err)
		if s := states[0]; s.Quarantined && s.Reason != redlock.QuarantineYoung {
			t.Fatalf("NodeStates()[0] = %+v, want quarantined (young)", s)
		}
	case o[0] == redlock.NodeSuccess && time.Since(lost) >= maxTTL: // a very slow machine
	default:
		t.Fatalf("the young node's outcome: %v (all: %v)", o[0], o)
	}
	wantNoErr(t, "Unlock", l.Unlock())
	if _, err := watchQuarantine(t, m, 0, redlock.QuarantineYoung, maxTTL, lost); err != nil {
		t.Fatal(err)
	}
}

// With restart quarantine off, no marker is read or written, and a node restarted empty
// counts at once: the unsafe case the switch is only for nodes that persist every write.
func TestQuarantineOff(t *testing.T) {
	t.Parallel()
	servers := startCluster(t, 3)
	nodes := urls(servers)
	m := newManager(t, nodes, redlock.WithRestartQuarantine(false))
	for i := range servers {
		if o := seenOutcome(t, m, i); o != redlock.NodeSuccess {
			t.Fatalf("node %d: outcome %v", i, o)
		}
	}
	servers[0].restart(t)
	if o := seenOutcome(t, m, 0); o != redlock.NodeSuccess {
		t.Fatalf("node 0 restarted empty, quarantine off: outcome %v, want %v", o, redlock.NodeSuccess)
	}
	states, err := m.NodeStates()
	wantNoErr(t, "NodeStates", err)
	for i, s := range states {
		if s != (redlock.NodeState{Index: i}) {
			t.Fatalf("NodeStates()[%d] = %+v with quarantine off", i, s)
		}
	}
	for i, s := range servers {
		if v, ok := s.marker(t); ok {
			t.Fatalf("node %d has a marker (%q) with quarantine off", i, v)
		}
	}
}

// A lock's TTL, and Extend's, may not exceed the manager's maximum TTL; nothing is sent.
func TestMaxTTL(t *testing.T) {
	t.Parallel()
	m := newManager(t, sharedNodes, redlock.WithMaxTTL(time.Second))
	res := uniq(t)
	for name, acquire := range map[string]func() (*redlock.Lock, error){
		"Lock":     func() (*redlock.Lock, error) { return m.Lock(res, time.Second+time.Millisecond) },
		"TryLock":  func() (*redlock.Lock, error) { return m.TryLock(res, 2*time.Second, redlock.Fenced()) },
		"LockWait": func() (*redlock.Lock, error) { return m.LockWait(res, time.Minute, time.Second) },
	} {
		l, err := acquire()
		if l != nil {
			t.Fatalf("%s above the maximum TTL returned a lock", name)
		}
		wantIs(t, name+" above the maximum TTL", err, redlock.ErrInvalidArgument)
		if !strings.Contains(err.Error(), "maximum TTL") {
			t.Fatalf("%s: message %q does not name the maximum TTL", name, err)
		}
	}
	if n := present(t, sharedNodes, res); n != 0 {
		t.Fatal("a TTL above the maximum reached the nodes")
	}
	l, err := m.Lock(res, time.Second) // the maximum itself is fine
	wantNoErr(t, "Lock(max TTL)", err)
	defer l.Free()
	wantIs(t, "Extend above the maximum TTL", l.Extend(1001*time.Millisecond), redlock.ErrInvalidArgument)
	wantNoErr(t, "Extend(max TTL)", l.Extend(time.Second))
	wantNoErr(t, "Unlock", l.Unlock())

	// The default is DefaultMaxTTL.
	d := newManager(t, sharedNodes)
	_, err = d.TryLock(res, redlock.DefaultMaxTTL+time.Millisecond)
	wantIs(t, "TryLock(DefaultMaxTTL + 1ms)", err, redlock.ErrInvalidArgument)
	l2, err := d.TryLock(res, redlock.DefaultMaxTTL)
	wantNoErr(t, "TryLock(DefaultMaxTTL)", err)
	defer l2.Free()
	wantNoErr(t, "Unlock", l2.Unlock())
}

// Nodes added beside a used one have no marker, like nodes that restarted empty: the operator
// who knows they are new admits them, and they count at once.
func TestQuarantineAdmitNewNodes(t *testing.T) {
	t.Parallel()
	servers := startCluster(t, 3)
	nodes := urls(servers)
	first, err := redlock.New(nodes[:1], testTimeouts)
	wantNoErr(t, "New (node 0 alone)", err)
	l, err := first.TryLock(uniq(t), time.Second)
	wantNoErr(t, "TryLock on node 0 alone", err)
	wantNoErr(t, "Unlock", l.Unlock())
	first.Close()

	m, err := redlock.New(nodes, testTimeouts)
	wantNoErr(t, "New", err)
	t.Cleanup(func() { m.Close() })
	_, err = m.TryLock(uniq(t), time.Second)
	wantIs(t, "TryLock beside two unmarked nodes", err, redlock.ErrUnavailable)
	if !strings.Contains(err.Error(), "or it is new: admit a node") {
		t.Fatalf("the message does not say how to admit: %v", err)
	}
	wantIs(t, "AdmitNewNodes(3)", m.AdmitNewNodes(3), redlock.ErrInvalidArgument)
	wantIs(t, "AdmitNewNodes(-1)", m.AdmitNewNodes(-1), redlock.ErrInvalidArgument)
	wantNoErr(t, "AdmitNewNodes(1, 2)", m.AdmitNewNodes(1, 2))
	l, err = m.TryLock(uniq(t), time.Second)
	wantNoErr(t, "TryLock after admitting", err)
	for i, o := range l.NodeOutcomes() {
		if o == redlock.NodeQuarantined {
			t.Fatalf("node %d still quarantined after admission: %v", i, l.NodeOutcomes())
		}
	}
	wantNoErr(t, "Unlock", l.Unlock())
}
