package redlock_test

// LockContext, waiting by notification and cancellation, against servers of each test's own
// (so that no other test's locks or waiters share their channels or metrics).

import (
	"context"
	"errors"
	"testing"
	"time"

	redlock "github.com/redlock-quorum/redlock/bindings/go"
)

// lockResult is what a LockContext (or Acquire) running in a goroutine returned, and when.
type lockResult struct {
	l   *redlock.Lock
	err error
	at  time.Time
}

// lockAsync runs acquire in a goroutine; its result arrives on the channel.
func lockAsync(acquire func() (*redlock.Lock, error)) <-chan lockResult {
	ch := make(chan lockResult, 1)
	go func() {
		l, err := acquire()
		ch <- lockResult{l, err, time.Now()}
	}()
	return ch
}

// waitResult waits (at most limit) for the result of lockAsync.
func waitResult(t *testing.T, what string, ch <-chan lockResult, limit time.Duration) lockResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(limit):
		t.Fatalf("%s: no result within %v", what, limit)
		return lockResult{}
	}
}

// waitUntilWaiting returns once m's acquisition is asleep waiting for a release: it has retried
// (so it has subscribed and made the attempt that follows), plus 200 ms for that attempt. It
// checks that the acquisition has not returned meanwhile.
func waitUntilWaiting(t *testing.T, m *redlock.Manager, ch <-chan lockResult) {
	t.Helper()
	if !eventually(30*time.Second, func() bool { return metric(t, m, "redlock_acquire_retries_total") >= 1 }) {
		t.Fatal("the waiter never retried")
	}
	time.Sleep(200 * time.Millisecond)
	select {
	case r := <-ch:
		t.Fatalf("the waiter returned while the lock was held: %v, %v", r.l, r.err)
	default:
	}
}

// A context cancelled while LockContext waits ends it at once, with ErrCancelled matching
// context.Canceled, and leaves no key behind: once the holder unlocks, no node has the key.
func TestLockContextCancelWhileWaiting(t *testing.T) {
	t.Parallel()
	nodes := urls(startCluster(t, 3))
	holder := newManager(t, nodes)
	waiter := newManager(t, nodes)
	res := uniq(t)
	held, err := holder.Acquire(res, 30*time.Second, redlock.NoWait())
	wantNoErr(t, "Acquire by the holder", err)
	defer held.Free()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := lockAsync(func() (*redlock.Lock, error) { return waiter.LockContext(ctx, res, 10*time.Second) })
	waitUntilWaiting(t, waiter, ch)

	cancelled := time.Now()
	cancel()
	r := waitResult(t, "LockContext after cancel", ch, 30*time.Second)
	latency := r.at.Sub(cancelled)
	t.Logf("LockContext returned %v after the context was cancelled: %v", latency, r.err)
	if r.l != nil {
		t.Fatal("LockContext returned a lock held by another")
	}
	wantIs(t, "LockContext", r.err, redlock.ErrCancelled)
	wantIs(t, "LockContext", r.err, context.Canceled)
	if errors.Is(r.err, redlock.ErrNotAcquired) || errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("a cancellation matches ErrNotAcquired or DeadlineExceeded: %v", r.err)
	}
	var e *redlock.Error
	if !errors.As(r.err, &e) || e.Status != redlock.StatusCancelled || e.Message != "cancelled: context canceled" {
		t.Fatalf("errors.As: %#v", e)
	}
	// At once: without the cancellation the wait lasts as long as the holder's 30 s TTL. A
	// bound of a sixth of that, not of milliseconds, which a busy machine may take to
	// schedule the goroutines.
	if latency > 5*time.Second {
		t.Fatalf("LockContext returned %v after the cancellation, want under 5 s", latency)
	}
	if n := metric(t, waiter, `redlock_acquire_total{result="cancelled"}`); n != 1 {
		t.Fatalf(`redlock_acquire_total{result="cancelled"} is %d, want 1`, n)
	}

	// Only the holder's key is on the nodes; after its unlock, none.
	if n := holding(t, nodes, res, held.Value()); n != len(nodes) {
		t.Fatalf("the holder's token is on %d nodes, want %d", n, len(nodes))
	}
	wantNoErr(t, "Unlock by the holder", held.Unlock())
	if n := present(t, nodes, res); n != 0 {
		t.Fatalf("the key is on %d nodes after the holder's unlock", n)
	}

	// A cause given to context.WithCancelCause matches too, with context.Canceled.
	again, err := holder.Acquire(res, 30*time.Second, redlock.NoWait())
	wantNoErr(t, "Acquire by the holder again", err)
	defer again.Free()
	shutdown := errors.New("shutting down")
	cctx, ccancel := context.WithCancelCause(context.Background())
	defer ccancel(nil)
	go func() {
		time.Sleep(200 * time.Millisecond)
		ccancel(shutdown)
	}()
	_, err = waiter.LockContext(cctx, res, 10*time.Second, redlock.Fenced())
	wantIs(t, "LockContext(WithCancelCause)", err, redlock.ErrCancelled)
	wantIs(t, "LockContext(WithCancelCause)", err, context.Canceled)
	wantIs(t, "LockContext(WithCancelCause)", err, shutdown)
	if got, want := err.Error(), "redlock: cancelled: context canceled: shutting down"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	wantNoErr(t, "Unlock by the holder", again.Unlock())
	if n := present(t, nodes, res); n != 0 {
		t.Fatalf("the key is on %d nodes after the holder's unlock", n)
	}
}

// A context that has ended already returns at once, without an attempt: ErrCancelled for a
// cancelled one, ErrNotAcquired for one past its deadline, each matching the context's error.
// Bad arguments are still ErrInvalidArgument.
func TestLockContextEndedBefore(t *testing.T) {
	t.Parallel()
	nodes := urls(startCluster(t, 3))
	m := newManager(t, nodes)
	res := uniq(t)

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := m.LockContext(cancelled, res, time.Second)
	wantIs(t, "LockContext(cancelled)", err, redlock.ErrCancelled)
	wantIs(t, "LockContext(cancelled)", err, context.Canceled)

	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	_, err = m.LockContext(expired, res, time.Second, redlock.Wait(time.Minute))
	wantIs(t, "LockContext(expired)", err, redlock.ErrNotAcquired)
	wantIs(t, "LockContext(expired)", err, context.DeadlineExceeded)
	if errors.Is(err, redlock.ErrCancelled) {
		t.Fatalf("a deadline matches ErrCancelled: %v", err)
	}
	if a := metric(t, m, "redlock_acquire_attempts_total"); a != 0 {
		t.Fatalf("%d attempts for contexts that had ended", a)
	}
	if n := present(t, nodes, res); n != 0 {
		t.Fatalf("the key is on %d nodes", n)
	}

	_, err = m.LockContext(nil, res, time.Second) //nolint:staticcheck // a nil context is what is tested
	wantIs(t, "LockContext(nil ctx)", err, redlock.ErrInvalidArgument)
	_, err = m.LockContext(cancelled, res, 0)
	wantIs(t, "LockContext(cancelled, TTL 0)", err, redlock.ErrInvalidArgument)
	_, err = m.LockContext(context.Background(), res, time.Second, redlock.Wait(-time.Second))
	wantIs(t, "LockContext(Wait(-1s))", err, redlock.ErrInvalidArgument)
	var nilManager *redlock.Manager
	_, err = nilManager.LockContext(context.Background(), res, time.Second)
	wantIs(t, "nil Manager", err, redlock.ErrNullArgument)

	// Uncontended, LockContext takes the lock at once, with every option.
	l, err := m.LockContext(context.Background(), res, 5*time.Second, redlock.Fenced(), redlock.AutoRenew(time.Minute))
	wantNoErr(t, "LockContext", err)
	defer l.Free()
	if holding(t, nodes, res, l.Value()) < 2 || l.FencingToken() == 0 || !l.Renewing() {
		t.Fatalf("LockContext's lock: %v, renewing %v", l, l.Renewing())
	}
	wantNoErr(t, "Unlock", l.Unlock())

	// After Close: ErrClosed, also for a context that has not ended.
	m.Close()
	_, err = m.LockContext(context.Background(), res, time.Second)
	if err != redlock.ErrClosed {
		t.Fatalf("LockContext after Close: %v", err)
	}
}

// A deadline that passes while LockContext waits ends it soon after, with ErrNotAcquired
// matching context.DeadlineExceeded (never ErrCancelled), whether the wait is the context's
// (no wait option) or a longer Wait option; NoWait makes one attempt, whose error does not
// match the context's while it has not ended.
func TestLockContextDeadline(t *testing.T) {
	t.Parallel()
	nodes := urls(startCluster(t, 3))
	holder := newManager(t, nodes)
	waiter := newManager(t, nodes)
	res := uniq(t)
	held, err := holder.Acquire(res, 30*time.Second, redlock.NoWait())
	wantNoErr(t, "Acquire by the holder", err)
	defer held.Free()

	const timeout = 700 * time.Millisecond
	for _, c := range []struct {
		name string
		opts []redlock.LockOption
	}{
		{"no wait option", nil},
		{"Wait(1m)", []redlock.LockOption{redlock.Wait(time.Minute)}},
		{"WithNotify(false)", []redlock.LockOption{redlock.WithNotify(false), redlock.Fenced()}},
	} {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		l, err := waiter.LockContext(ctx, res, 10*time.Second, c.opts...)
		elapsed := time.Since(start)
		cancel()
		t.Logf("%s: LockContext returned after %v with a %v deadline: %v", c.name, elapsed, timeout, err)
		if l != nil {
			t.Fatalf("%s: acquired a held lock", c.name)
		}
		wantIs(t, c.name, err, redlock.ErrNotAcquired)
		wantIs(t, c.name, err, context.DeadlineExceeded)
		if errors.Is(err, redlock.ErrCancelled) || errors.Is(err, context.Canceled) {
			t.Fatalf("%s: a deadline matches ErrCancelled or context.Canceled: %v", c.name, err)
		}
		// Soon after the deadline, not at the holder's 30 s TTL nor the 1 m wait: the slack is
		// for a busy machine's scheduling (and an attempt in flight, bounded by node timeouts).
		if elapsed < timeout-100*time.Millisecond || elapsed > timeout+3*time.Second {
			t.Fatalf("%s: LockContext returned after %v, want the deadline (%v) + at most 3 s", c.name, elapsed, timeout)
		}
	}

	// NoWait: one attempt, over long before the deadline.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before := metric(t, waiter, "redlock_acquire_attempts_total")
	_, err = waiter.LockContext(ctx, res, 10*time.Second, redlock.NoWait())
	wantIs(t, "LockContext(NoWait)", err, redlock.ErrNotAcquired)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("LockContext(NoWait) matches the deadline of a context that has not ended: %v", err)
	}
	if a := metric(t, waiter, "redlock_acquire_attempts_total") - before; a != 1 {
		t.Fatalf("LockContext(NoWait) made %d attempts", a)
	}

	if n := holding(t, nodes, res, held.Value()); n != len(nodes) {
		t.Fatalf("the holder's token is on %d nodes, want %d", n, len(nodes))
	}
	wantNoErr(t, "Unlock by the holder", held.Unlock())
	if n := present(t, nodes, res); n != 0 {
		t.Fatalf("the key is on %d nodes after the holder's unlock", n)
	}
}

// A waiter is woken by the release: with a 30 s retry delay (a random pause would be under
// 3 s a tenth of the time) and a holder's TTL of 30 s, LockContext, and Acquire with a Wait
// option, get the lock within 3 s of the holder's unlock (well under a second on an idle
// machine; the rest is room for a busy one's scheduling).
func TestLockContextWokenByRelease(t *testing.T) {
	t.Parallel()
	nodes := urls(startCluster(t, 3))
	holder := newManager(t, nodes)
	res := uniq(t)
	for _, c := range []struct {
		name    string
		acquire func(m *redlock.Manager) (*redlock.Lock, error)
	}{
		{"LockContext", func(m *redlock.Manager) (*redlock.Lock, error) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			return m.LockContext(ctx, res, 10*time.Second, redlock.Fenced())
		}},
		{"LockContext without a deadline", func(m *redlock.Manager) (*redlock.Lock, error) {
			return m.LockContext(context.Background(), res, 10*time.Second)
		}},
		{"Acquire(Wait(1m))", func(m *redlock.Manager) (*redlock.Lock, error) {
			return m.Acquire(res, 10*time.Second, redlock.Wait(time.Minute))
		}},
	} {
		// A manager of its own for each, so that its metrics count this waiter only.
		waiter := newManager(t, nodes, redlock.WithRetry(3, 30*time.Second))
		held, err := holder.Acquire(res, 30*time.Second, redlock.NoWait())
		wantNoErr(t, c.name+": Acquire by the holder", err)
		ch := lockAsync(func() (*redlock.Lock, error) { return c.acquire(waiter) })
		waitUntilWaiting(t, waiter, ch)

		wantNoErr(t, c.name+": Unlock by the holder", held.Unlock())
		unlocked := time.Now()
		held.Free()
		r := waitResult(t, c.name, ch, 60*time.Second)
		handoff := r.at.Sub(unlocked)
		t.Logf("%s: got the lock %v after the holder's unlock", c.name, handoff)
		wantNoErr(t, c.name, r.err)
		if handoff > 3*time.Second {
			t.Fatalf("%s: got the lock %v after the unlock, want well under 3 s", c.name, handoff)
		}
		if n := holding(t, nodes, res, r.l.Value()); n < 2 {
			t.Fatalf("%s: the waiter's token is on %d nodes", c.name, n)
		}
		wantNoErr(t, c.name+": Unlock by the waiter", r.l.Unlock())
		r.l.Free()
	}
}

// Polling (WithNotify(false)) still gets a released lock, after its random pauses.
func TestWaitWithNotifyFalse(t *testing.T) {
	t.Parallel()
	nodes := urls(startCluster(t, 3))
	holder := newManager(t, nodes)
	waiter := newManager(t, nodes, redlock.WithRetry(0, 20*time.Millisecond))
	res := uniq(t)
	held, err := holder.Acquire(res, 30*time.Second, redlock.NoWait())
	wantNoErr(t, "Acquire by the holder", err)
	defer held.Free()
	ch := lockAsync(func() (*redlock.Lock, error) {
		return waiter.Acquire(res, 10*time.Second, redlock.Wait(time.Minute), redlock.WithNotify(false))
	})
	// Polling every 20 ms at most: many retries while the lock is held.
	if !eventually(30*time.Second, func() bool { return metric(t, waiter, "redlock_acquire_retries_total") >= 5 }) {
		t.Fatal("the polling waiter did not retry")
	}
	wantNoErr(t, "Unlock by the holder", held.Unlock())
	r := waitResult(t, "Acquire(Wait, WithNotify(false))", ch, 30*time.Second)
	wantNoErr(t, "Acquire(Wait, WithNotify(false))", r.err)
	wantNoErr(t, "Unlock by the waiter", r.l.Unlock())
	r.l.Free()
}

// Close cancels the LockContext calls in progress, which return ErrClosed, instead of waiting
// for contexts that may never end; it then returns.
func TestLockContextClose(t *testing.T) {
	t.Parallel()
	nodes := urls(startCluster(t, 3))
	holder := newManager(t, nodes)
	res := uniq(t)
	held, err := holder.Acquire(res, 30*time.Second, redlock.NoWait())
	wantNoErr(t, "Acquire by the holder", err)
	defer held.Free()

	waiter, err := redlock.New(nodes, testTimeouts)
	wantNoErr(t, "New", err)
	defer waiter.Close()
	var chs []<-chan lockResult
	for i := 0; i < 3; i++ {
		chs = append(chs, lockAsync(func() (*redlock.Lock, error) {
			return waiter.LockContext(context.Background(), res, 10*time.Second)
		}))
	}
	waitUntilWaiting(t, waiter, chs[0])

	closed := time.Now()
	closeDone := make(chan struct{})
	go func() {
		waiter.Close()
		close(closeDone)
	}()
	select {
	case <-closeDone:
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return")
	}
	t.Logf("Close returned %v after it was called, with 3 LockContext calls waiting", time.Since(closed))
	for i, ch := range chs {
		r := waitResult(t, "LockContext during Close", ch, 30*time.Second)
		if r.err != redlock.ErrClosed {
			t.Fatalf("LockContext %d during Close: %v, %v", i, r.l, r.err)
		}
	}
	if time.Since(closed) > 5*time.Second {
		t.Fatalf("Close and the waiters took %v", time.Since(closed))
	}
	wantNoErr(t, "Unlock by the holder", held.Unlock())
	if n := present(t, nodes, res); n != 0 {
		t.Fatalf("the key is on %d nodes after the holder's unlock", n)
	}
}
