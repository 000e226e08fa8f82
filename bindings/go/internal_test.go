package redlock

import (
	"errors"
	"math"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestMillis(t *testing.T) {
	for _, c := range []struct {
		d  time.Duration
		ms uint32
		ok bool
	}{
		{0, 0, true},
		{time.Nanosecond, 1, true},
		{time.Millisecond, 1, true},
		{time.Millisecond + time.Nanosecond, 2, true},
		{1500 * time.Microsecond, 2, true},
		{10 * time.Second, 10000, true},
		{MaxTTL, math.MaxUint32, true},
		{MaxTTL - time.Nanosecond, math.MaxUint32, true},
		{MaxTTL + time.Nanosecond, 0, false},
		{math.MaxInt64, 0, false},
		{-time.Nanosecond, 0, false},
		{math.MinInt64, 0, false},
	} {
		ms, ok := millis(c.d)
		if ms != c.ms || ok != c.ok {
			t.Errorf("millis(%v) = %d, %v; want %d, %v", c.d, ms, ok, c.ms, c.ok)
		}
	}
	if _, err := ttlMillis(0); err == nil {
		t.Error("ttlMillis(0) accepted")
	}
	if ms, err := ttlMillis(time.Nanosecond); err != nil || ms != 1 {
		t.Errorf("ttlMillis(1ns) = %d, %v", ms, err)
	}
}

func TestHeaderMatchesLibrary(t *testing.T) {
	if v := Version(); v != headerVersion {
		t.Fatalf("library version %q, header version %q: rebuild with cargo build --release", v, headerVersion)
	}
}

// gcUntil runs the collector until cond holds (finalizers run asynchronously), at most ~5 s.
func gcUntil(cond func() bool) bool {
	for i := 0; i < 250; i++ {
		runtime.GC()
		if cond() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// Finalizers free managers and locks that were never closed or freed. (Not parallel: the
// counters are package-wide.)
func TestFinalizersFree(t *testing.T) {
	nodes := strings.Split(os.Getenv("REDLOCK_NODES"), ",")
	if len(nodes) < 3 || nodes[0] == "" {
		t.Fatal("REDLOCK_NODES is not set: TestMain should have started the servers")
	}
	const n = 10
	beforeM, beforeL := managersFreed.Load(), locksFreed.Load()
	func() {
		for i := 0; i < n; i++ {
			m, err := New(nodes, WithTimeouts(time.Second, 500*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			l, err := m.TryLock("TestFinalizersFree/"+time.Now().String(), time.Second)
			if err != nil {
				t.Fatal(err)
			}
			_ = l.Token() // neither closed nor freed nor unlocked: left to the finalizers
		}
	}()
	ok := gcUntil(func() bool {
		return managersFreed.Load()-beforeM >= n && locksFreed.Load()-beforeL >= n
	})
	if !ok {
		t.Fatalf("finalizers freed %d managers and %d locks of %d each",
			managersFreed.Load()-beforeM, locksFreed.Load()-beforeL, n)
	}

	// Close and Free free exactly once, and detach the finalizer.
	m, err := New(nodes)
	if err != nil {
		t.Fatal(err)
	}
	before := managersFreed.Load()
	m.Close()
	m.Close()
	if got := managersFreed.Load() - before; got != 1 {
		t.Fatalf("two Closes freed %d times", got)
	}
}

// The callback handles of auto-renewed locks are released by Free and by the finalizer.
func TestRenewHandlesReleased(t *testing.T) {
	nodes := strings.Split(os.Getenv("REDLOCK_NODES"), ",")
	m, err := New(nodes, WithTimeouts(time.Second, 500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	before := renewHandles.Load()
	l, err := m.TryLock("TestRenewHandlesReleased/"+time.Now().String(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ { // one handle however often the settings are replaced
		if err := l.AutoRenew(0, 0, func() {}); err != nil {
			t.Fatal(err)
		}
	}
	if got := renewHandles.Load() - before; got != 1 {
		t.Fatalf("%d live handles for one lock", got)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	l.Free()
	if got := renewHandles.Load() - before; got != 0 {
		t.Fatalf("Free left %d handles", got)
	}

	func() {
		for i := 0; i < 5; i++ {
			l, err := m.TryLock("TestRenewHandlesReleased/gc/"+time.Now().String(), time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.AutoRenew(0, 0, nil); err != nil {
				t.Fatal(err)
			}
		}
	}()
	if !gcUntil(func() bool { return renewHandles.Load() == before }) {
		t.Fatalf("finalizers left %d handles", renewHandles.Load()-before)
	}
}

// When auto-renewal requested by the AutoRenew option cannot start after the lock was
// acquired, Lock unlocks and frees the lock and returns the error: no lock, C memory or
// callback handle leaks. (The hook unlocks the lock first, so that starting renewal fails with
// ErrNotHeld. Not parallel: the counters are package-wide.)
func TestAutoRenewOptionFailureReleases(t *testing.T) {
	nodes := strings.Split(os.Getenv("REDLOCK_NODES"), ",")
	m, err := New(nodes, WithTimeouts(time.Second, 500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var hooked *Lock
	m.afterAcquire = func(l *Lock) {
		hooked = l
		if err := l.Unlock(); err != nil {
			t.Errorf("hook: Unlock: %v", err)
		}
	}
	beforeL, beforeH := locksFreed.Load(), renewHandles.Load()
	res := "TestAutoRenewOptionFailureReleases/" + time.Now().String()
	l, err := m.Lock(res, 10*time.Second, Fenced(), AutoRenew(time.Minute), OnLost(func(*Lock) {}))
	if l != nil || !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Lock = %v, %v; want nil, ErrNotHeld", l, err)
	}
	if hooked == nil {
		t.Fatal("the hook did not run")
	}
	if got := locksFreed.Load() - beforeL; got != 1 {
		t.Fatalf("%d locks freed, want 1", got)
	}
	if got := renewHandles.Load() - beforeH; got != 0 {
		t.Fatalf("%d callback handles left", got)
	}
	if err := hooked.Unlock(); !errors.Is(err, ErrClosed) {
		t.Fatalf("the lock was not freed: Unlock = %v", err)
	}

	// With a hook that leaves the lock alone, the same call succeeds: the failure was the
	// renewal's.
	m.afterAcquire = nil
	l, err = m.Lock(res, 10*time.Second, Fenced(), AutoRenew(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if !l.Renewing() {
		t.Fatal("not renewing")
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	l.Free()
}

// An OnLost callback refers to its Lock, but only while renewal is on: a Lock whose renewal
// ended (here by Unlock) is finalized like any other, and its handle released.
func TestOnLostLockCollectable(t *testing.T) {
	nodes := strings.Split(os.Getenv("REDLOCK_NODES"), ",")
	m, err := New(nodes, WithTimeouts(time.Second, 500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	before := renewHandles.Load()
	func() {
		for i := 0; i < 5; i++ {
			l, err := m.TryLock("TestOnLostLockCollectable/"+time.Now().String(), time.Second,
				AutoRenew(0), OnLost(func(l *Lock) { _ = l.Token() }))
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Unlock(); err != nil {
				t.Fatal(err)
			}
		}
	}()
	if !gcUntil(func() bool { return renewHandles.Load() == before }) {
		t.Fatalf("finalizers left %d handles", renewHandles.Load()-before)
	}
}
