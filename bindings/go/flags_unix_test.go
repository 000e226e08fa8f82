//go:build unix

package redlock_test

import (
	"syscall"
	"testing"
	"time"

	redlock "github.com/redlock-quorum/redlock/bindings/go"
)

// IsLost and Renewing answer at once while an Extend is stuck waiting for nodes that do not
// answer (stopped with SIGSTOP), and while an AutoRenew call waits for that Extend.
//
// The Extend waits out a 10 s node timeout: the flags must answer far sooner (2 s: no
// scheduling delay of a busy machine, and no wait for the Extend), and the test's checks,
// however slowly a busy machine runs them, all come while it is still under way.
func TestLockFlagsDoNotWait(t *testing.T) {
	t.Parallel()
	servers := startCluster(t, 3)
	m := newManager(t, urls(servers), redlock.WithTimeouts(time.Second, 10*time.Second))
	l, err := m.Lock(uniq(t), 20*time.Second, redlock.AutoRenew(time.Minute))
	wantNoErr(t, "Lock", err)
	defer l.Free()
	for _, s := range servers[1:] {
		if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { // kill (SIGKILL) ends stopped servers too; continue them anyway
		for _, s := range servers[1:] {
			_ = s.cmd.Process.Signal(syscall.SIGCONT)
		}
	})
	extended := make(chan error, 1)
	start := time.Now()
	go func() { extended <- l.Extend(20 * time.Second) }()
	time.Sleep(200 * time.Millisecond)
	renewed := make(chan error, 1)
	go func() { renewed <- l.AutoRenew(time.Minute, 0, nil) }()
	time.Sleep(100 * time.Millisecond)
	for i := 0; i < 5; i++ {
		t0 := time.Now()
		lost, renewing := l.IsLost(), l.Renewing()
		if d := time.Since(t0); d > 2*time.Second {
			t.Fatalf("IsLost and Renewing took %v with an Extend in flight", d)
		}
		if lost || !renewing {
			t.Fatalf("IsLost %v, Renewing %v during the Extend", lost, renewing)
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case err := <-extended:
		t.Fatalf("the Extend returned (%v) after %v: the test did not overlap it", err, time.Since(start))
	default:
	}
	for _, s := range servers[1:] {
		_ = s.cmd.Process.Signal(syscall.SIGCONT)
	}
	select {
	case err := <-extended:
		t.Logf("Extend with two nodes stopped: %v after %v", err, time.Since(start))
	case <-time.After(10 * time.Second):
		t.Fatal("Extend hung")
	}
	select {
	case err := <-renewed:
		t.Logf("AutoRenew behind it: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("AutoRenew hung")
	}
	_ = l.Unlock()
}
