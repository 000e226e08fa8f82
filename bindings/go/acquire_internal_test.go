package redlock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// The C acquisition options are made once per option set and shared: the common sets (the
// defaults, NoWait, Fenced, both, each exclusive or shared, for one resource or several) cost
// nothing per call, each Wait duration (exclusive or shared) is made on first use up to
// maxWaitOpts, later durations get options made and freed for the one call, and
// Close frees everything. Counted per manager, so it runs in parallel with anything.
func TestAcquireOptionsCached(t *testing.T) {
	t.Parallel()
	nodes := strings.Split(os.Getenv("REDLOCK_NODES"), ",")
	m, err := New(nodes, WithTimeouts(time.Second, 500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	live := func() int { return int(m.optsLive.Load()) }
	if got := live(); got != len(m.fixedOpts) {
		t.Fatalf("a new manager holds %d options, want %d", got, len(m.fixedOpts))
	}
	res := fmt.Sprintf("TestAcquireOptionsCached/%d", time.Now().UnixNano())
	cycle := func(what string, acquire func() (*Lock, error)) {
		t.Helper()
		l, err := acquire()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if err := l.Unlock(); err != nil {
			t.Fatalf("%s: Unlock: %v", what, err)
		}
		l.Free()
	}

	// The common sets, through every method: nothing is made.
	for i := 0; i < 3; i++ {
		cycle("Acquire", func() (*Lock, error) { return m.Acquire(res, time.Second) })
		cycle("Acquire(NoWait)", func() (*Lock, error) { return m.Acquire(res, time.Second, NoWait()) })
		cycle("Acquire(Fenced)", func() (*Lock, error) { return m.Acquire(res, time.Second, Fenced()) })
		cycle("Acquire(NoWait, Fenced)", func() (*Lock, error) { return m.Acquire(res, time.Second, NoWait(), Fenced()) })
		cycle("Lock", func() (*Lock, error) { return m.Lock(res, time.Second, Fenced()) })
		cycle("TryLock", func() (*Lock, error) { return m.TryLock(res, time.Second) })
		cycle("LockWait(0)", func() (*Lock, error) { return m.LockWait(res, time.Second, 0, Fenced()) })
	}
	if got := live(); got != len(m.fixedOpts) {
		t.Fatalf("after the common sets the manager holds %d options, want %d", got, len(m.fixedOpts))
	}

	// The same sets shared (made by New too), and for several resources (the exclusive ones).
	many := []string{res + "/a", res + "/b"}
	for i := 0; i < 3; i++ {
		cycle("Acquire(WithShared)", func() (*Lock, error) { return m.Acquire(res, time.Second, WithShared()) })
		cycle("TryLock(WithShared, Fenced)", func() (*Lock, error) { return m.TryLock(res, time.Second, WithShared(), Fenced()) })
		cycle("Lock(Fenced, WithShared)", func() (*Lock, error) { return m.Lock(res, time.Second, Fenced(), WithShared()) })
		cycle("TryLockMany", func() (*Lock, error) { return m.TryLockMany(many, time.Second) })
		cycle("LockMany", func() (*Lock, error) { return m.LockMany(many, time.Second) })
		cycle("AcquireMany(NoWait)", func() (*Lock, error) { return m.AcquireMany(many, time.Second, NoWait()) })
	}
	if got := live(); got != len(m.fixedOpts) {
		t.Fatalf("after the shared and multi-resource sets the manager holds %d options, want %d", got, len(m.fixedOpts))
	}

	// A Wait duration is made once, whichever method asks for it, and per fencing.
	for i := 0; i < 3; i++ {
		cycle("Acquire(Wait(2s))", func() (*Lock, error) { return m.Acquire(res, time.Second, Wait(2*time.Second)) })
		cycle("LockWait(2s)", func() (*Lock, error) { return m.LockWait(res, time.Second, 2*time.Second) })
		cycle("LockWait(2s, Fenced)", func() (*Lock, error) { return m.LockWait(res, time.Second, 2*time.Second, Fenced()) })
		cycle("LockWait(2s, WithShared)", func() (*Lock, error) { return m.LockWait(res, time.Second, 2*time.Second, WithShared()) })
		cycle("LockManyWait(2s)", func() (*Lock, error) { return m.LockManyWait(many, time.Second, 2*time.Second) })
	}
	if got, want := live(), len(m.fixedOpts)+3; got != want {
		t.Fatalf("after one Wait duration the manager holds %d options, want %d", got, want)
	}

	// WithNotify(false) changes a wait only: with Wait, options of their own, made once; without
	// a wait, the shared ones.
	for i := 0; i < 3; i++ {
		cycle("Acquire(Wait(2s), WithNotify(false))", func() (*Lock, error) {
			return m.Acquire(res, time.Second, Wait(2*time.Second), WithNotify(false))
		})
		cycle("Acquire(NoWait, WithNotify(false))", func() (*Lock, error) {
			return m.Acquire(res, time.Second, NoWait(), WithNotify(false))
		})
		cycle("Acquire(WithNotify(true))", func() (*Lock, error) { return m.Acquire(res, time.Second, WithNotify(true)) })
	}
	if got, want := live(), len(m.fixedOpts)+4; got != want {
		t.Fatalf("after WithNotify(false) the manager holds %d options, want %d", got, want)
	}

	// WithFair (like WithOwner) makes options for each call, and frees them.
	for i := 0; i < 3; i++ {
		cycle("TryLock(WithFair)", func() (*Lock, error) { return m.TryLock(res, time.Second, WithFair()) })
		cycle("LockWait(2s, WithFair, WithDropOut)", func() (*Lock, error) {
			return m.LockWait(res, time.Second, 2*time.Second, WithFair(), WithDropOut(time.Second))
		})
		cycle("Acquire(WithFair, Fenced)", func() (*Lock, error) { return m.Acquire(res, time.Second, WithFair(), Fenced()) })
	}
	if got, want := live(), len(m.fixedOpts)+4; got != want {
		t.Fatalf("after WithFair the manager holds %d options, want %d", got, want)
	}

	// LockContext makes options (and a cancel handle) for each call, and frees them.
	for i := 0; i < 3; i++ {
		cycle("LockContext", func() (*Lock, error) { return m.LockContext(context.Background(), res, time.Second) })
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cycle("LockContext(deadline, Fenced)", func() (*Lock, error) { return m.LockContext(ctx, res, time.Second, Fenced()) })
		cycle("LockManyContext(deadline)", func() (*Lock, error) { return m.LockManyContext(ctx, many, time.Second) })
		cancel()
	}
	if got, want := live(), len(m.fixedOpts)+4; got != want {
		t.Fatalf("after LockContext the manager holds %d options, want %d", got, want)
	}
	m.cancelMu.Lock()
	if len(m.cancels) != 0 {
		t.Fatalf("%d cancel handles registered after LockContext returned", len(m.cancels))
	}
	m.cancelMu.Unlock()

	// Up to maxWaitOpts of them; the next ones are made and freed for their call.
	for i := 0; i < maxWaitOpts+10; i++ {
		d := time.Duration(1000+i) * time.Millisecond
		cycle("Acquire(Wait(d))", func() (*Lock, error) { return m.Acquire(res, time.Second, Wait(d)) })
	}
	if got, want := live(), len(m.fixedOpts)+maxWaitOpts; got != want {
		t.Fatalf("after many Wait durations the manager holds %d options, want %d", got, want)
	}

	// Refused calls make nothing.
	if _, err := m.Acquire(res, time.Second, Wait(-time.Second)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Wait(-1s): %v", err)
	}
	if _, err := m.Acquire(res, 0, Wait(7*time.Second)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("TTL 0: %v", err)
	}
	if _, err := m.Acquire(res, time.Second, Wait(7*time.Second), WithShared(), WithOwner("o")); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("WithShared and WithOwner: %v", err)
	}
	if _, err := m.AcquireMany([]string{res, res}, time.Second, Wait(7*time.Second)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a duplicate resource: %v", err)
	}
	if got, want := live(), len(m.fixedOpts)+maxWaitOpts; got != want {
		t.Fatalf("after refused calls the manager holds %d options, want %d", got, want)
	}

	m.Close()
	if got := live(); got != 0 {
		t.Fatalf("Close left %d options", got)
	}
	if len(m.waitOpts) != 0 || m.fixedOpts != [len(m.fixedOpts)]*_Ctype_struct_redlock_acquire_opts{} {
		t.Fatal("Close left pointers to freed options")
	}
	if _, err := m.Acquire(res, time.Second, Wait(2*time.Second)); err != ErrClosed {
		t.Fatalf("Acquire after Close: %v", err)
	}
	if got := live(); got != 0 {
		t.Fatalf("Acquire after Close made %d options", got)
	}
}

// Each options index names the set it holds, and every set but the defaults has one.
func TestFixedOptsIndex(t *testing.T) {
	if fixedOptsIndex(waitRetries, false, false) != -1 {
		t.Fatal("the defaults have options of their own")
	}
	var m Manager
	seen := map[[3]any]bool{}
	for i := range m.fixedOpts {
		w, f, sh := fixedOptsKey(i)
		if fixedOptsIndex(w, f, sh) != i {
			t.Fatalf("fixedOptsIndex(fixedOptsKey(%d)) = %d", i, fixedOptsIndex(w, f, sh))
		}
		if w != waitRetries && w != waitNone {
			t.Fatalf("fixedOptsKey(%d) waits %v", i, w)
		}
		seen[[3]any{w, f, sh}] = true
	}
	if len(seen) != len(m.fixedOpts) {
		t.Fatalf("%d distinct sets in %d slots", len(seen), len(m.fixedOpts))
	}
}

// The cost the cache saves: making, setting and freeing C options for a call (what a
// Wait duration beyond maxWaitOpts costs), against finding them in the cache. No network.
func BenchmarkAcquireOpts(b *testing.B) {
	nodes := strings.Split(os.Getenv("REDLOCK_NODES"), ",")
	m, err := New(nodes)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	for _, c := range []struct {
		name string
		o    lockOptions
	}{
		{"defaults", lockOptions{}},
		{"NoWait+Fenced", lockOptions{wait: waitNone, fenced: true}},
		{"Wait/cached", lockOptions{wait: waitFor, waitMs: 5000}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				m.mu.RLock()
				_, temp, err := m.acquireOpts(&c.o)
				m.mu.RUnlock()
				if err != nil || temp {
					b.Fatal(err, temp)
				}
			}
		})
	}
	b.Run("made per call", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			o, err := m.newAcquireOpts(waitFor, 5000, true, false, false)
			if err != nil {
				b.Fatal(err)
			}
			m.freeAcquireOpts(o)
		}
	})
}

// An owner id the library refuses (WithOwner refuses it first; here it is set directly)
// comes back with the library's message, which names the argument and its limit.
func TestOwnerRefusalSaysTheLimit(t *testing.T) {
	t.Parallel()
	nodes := strings.Split(os.Getenv("REDLOCK_NODES"), ",")
	m, err := New(nodes)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	o := &lockOptions{ownerSet: true, owner: strings.Repeat("o", MaxOwnerLen+1)}
	opts, err := m.newOwnedAcquireOpts(o)
	if opts != nil {
		m.freeAcquireOpts(opts)
	}
	var e *Error
	if !errors.As(err, &e) || e.Status != StatusInvalidArgument {
		t.Fatalf("newOwnedAcquireOpts: %v, want StatusInvalidArgument", err)
	}
	if want := "owner id is 513 bytes; it must be 1 to 512 bytes"; e.Message != want {
		t.Fatalf("message %q, want %q", e.Message, want)
	}
}
