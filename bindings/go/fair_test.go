package redlock_test

// The fair lock (WithFair, WithDropOut, Lock.Ticket, Lock.IsFair) against the shared servers,
// each test on a resource of its own. Waiters started one after another (each once the one
// before is in the queue hash "redlock-fair:<lock key>" on a majority of the nodes, read with
// HLEN behind the library's back) are granted the lock in that order, each with a larger
// ticket; a release wakes the next waiter only; a lock granted at once has no ticket; a
// waiter that gives up leaves the queue; bad input is ErrInvalidArgument before anything is
// sent. Every wait is bounded and generous; the order checks are strict.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	redlock "github.com/redlock-quorum/redlock/bindings/go"
)

// noRefresh is a drop-out time long enough that no waiter refreshes its place while a test
// runs (a waiter refreshes every fifth of it): an attempt after a release is a wake-up.
const noRefresh = 10 * time.Minute

// fairQueueKey is the key of a resource's fair queue: a hash with one field per waiter.
func fairQueueKey(resource string) string { return "redlock-fair:" + lockKey(resource) }

// queuedOn returns on how many of the nodes the fair queue of resource holds at least n
// waiters.
func queuedOn(t testing.TB, nodes []string, resource string, n int64) int {
	t.Helper()
	on := 0
	for _, u := range nodes {
		v, err := respDo(addrOf(u), "HLEN", fairQueueKey(resource))
		if err != nil {
			t.Fatalf("HLEN on %s: %v", u, err)
		}
		if c, _ := v.(int64); c >= n {
			on++
		}
	}
	return on
}

// waitQueued waits until at least n waiters are queued on a majority of the nodes: the last
// of them has finished queueing, so whoever queues now gets a larger ticket.
func waitQueued(t testing.TB, nodes []string, resource string, n int64) {
	t.Helper()
	if !eventually(30*time.Second, func() bool { return queuedOn(t, nodes, resource, n) >= len(nodes)/2+1 }) {
		t.Fatalf("%d fair waiters never queued on a majority", n)
	}
}

// waitQueueGone waits until no node has a fair queue for resource (every entry left with its
// waiter).
func waitQueueGone(t testing.TB, nodes []string, resource string) {
	t.Helper()
	if !eventually(10*time.Second, func() bool { return queuedOn(t, nodes, resource, 1) == 0 }) {
		t.Fatal("the fair queue never emptied")
	}
}

// fairGrant is what a fair waiter records while it holds the lock: who it is and its ticket.
type fairGrant struct {
	i         int
	ticket    uint64
	hasTicket bool
}

// fairWaiters are goroutines that wait for a fair lock, record their grant while holding it
// (so grants is in grant order), hold it until release is closed (nil: 5 ms) and unlock it.
type fairWaiters struct {
	mu      sync.Mutex
	grants  []fairGrant
	errs    []error
	wg      sync.WaitGroup
	release chan struct{}
}

func (w *fairWaiters) start(m *redlock.Manager, resource string, i int) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		l, err := m.LockWait(resource, 10*time.Second, time.Minute, redlock.WithFair(), redlock.WithDropOut(noRefresh))
		if err != nil {
			w.mu.Lock()
			w.errs = append(w.errs, err)
			w.mu.Unlock()
			return
		}
		defer l.Free()
		ticket, ok := l.Ticket()
		w.mu.Lock()
		w.grants = append(w.grants, fairGrant{i, ticket, ok})
		if !l.IsFair() {
			w.errs = append(w.errs, errors.New("the waiter's lock is not fair"))
		}
		w.mu.Unlock()
		if w.release != nil {
			select {
			case <-w.release:
			case <-time.After(time.Minute):
			}
		} else {
			time.Sleep(5 * time.Millisecond)
		}
		if err := l.Unlock(); err != nil {
			w.mu.Lock()
			w.errs = append(w.errs, err)
			w.mu.Unlock()
		}
	}()
}

// wait waits (at most a minute) for every waiter, and fails on any error of theirs.
func (w *fairWaiters) wait(t *testing.T) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		w.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the fair waiters did not all return within a minute")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, err := range w.errs {
		t.Errorf("fair waiter: %v", err)
	}
}

// order returns who was granted the lock, in grant order.
func (w *fairWaiters) order() []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []int
	for _, g := range w.grants {
		out = append(out, g.i)
	}
	return out
}

// A fair lock granted at once, with nobody queued, has no ticket, through every method; a fair
// try while it is held is refused and queues nothing; a plain lock is not fair.
func TestFairGrantedAtOnceHasNoTicket(t *testing.T) {
	t.Parallel()
	m := newManager(t, sharedNodes)
	res := uniq(t)
	l, err := m.TryLock(res, 10*time.Second, redlock.WithFair())
	wantNoErr(t, "TryLock(WithFair)", err)
	if !l.IsFair() {
		t.Fatal("IsFair is false for a WithFair lock")
	}
	if ticket, ok := l.Ticket(); ok || ticket != 0 {
		t.Fatalf("Ticket() = %d, %v for a lock granted at once", ticket, ok)
	}
	if s := l.String(); !strings.Contains(s, ", fair") || strings.Contains(s, "ticket:") {
		t.Fatalf("String() = %q", s)
	}
	if n := holding(t, sharedNodes, res, l.Value()); n < 2 {
		t.Fatalf("held on %d nodes", n)
	}
	// Held: a plain try and fair tries are refused, and the fair ones queue nothing.
	_, err = m.TryLock(res, 10*time.Second)
	wantIs(t, "plain TryLock while held", err, redlock.ErrNotAcquired)
	_, err = m.TryLock(res, 10*time.Second, redlock.WithFair())
	wantIs(t, "fair TryLock while held", err, redlock.ErrNotAcquired)
	_, err = m.Acquire(res, 10*time.Second, redlock.NoWait(), redlock.WithFair(), redlock.WithDropOut(time.Second))
	wantIs(t, "fair Acquire(NoWait) while held", err, redlock.ErrNotAcquired)
	if n := queuedOn(t, sharedNodes, res, 1); n != 0 {
		t.Fatalf("a fair try queued on %d nodes", n)
	}
	wantNoErr(t, "Unlock", l.Unlock())
	l.Free()
	if _, ok := l.Ticket(); !l.IsFair() || ok {
		t.Fatal("IsFair or Ticket changed after Free")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for what, acquire := range map[string]func() (*redlock.Lock, error){
		"Lock(WithFair, WithDropOut(MinDropOut))": func() (*redlock.Lock, error) {
			return m.Lock(res, 10*time.Second, redlock.WithFair(), redlock.WithDropOut(redlock.MinDropOut))
		},
		"LockWait(WithFair, WithDropOut(MaxDropOut))": func() (*redlock.Lock, error) {
			return m.LockWait(res, 10*time.Second, 5*time.Second, redlock.WithFair(), redlock.WithDropOut(redlock.MaxDropOut))
		},
		"LockContext(WithFair, WithDropOut(0))": func() (*redlock.Lock, error) {
			return m.LockContext(ctx, res, 10*time.Second, redlock.WithFair(), redlock.WithDropOut(0))
		},
		"Acquire(Fenced, WithFair)": func() (*redlock.Lock, error) {
			return m.Acquire(res, 10*time.Second, redlock.Fenced(), redlock.WithFair())
		},
	} {
		l, err := acquire()
		wantNoErr(t, what, err)
		if _, ok := l.Ticket(); !l.IsFair() || ok {
			t.Fatalf("%s: IsFair %v, a ticket: %v", what, l.IsFair(), ok)
		}
		if strings.Contains(what, "Fenced") && l.FencingToken() == 0 {
			t.Fatalf("%s: no fencing token", what)
		}
		wantNoErr(t, what+": Unlock", l.Unlock())
		l.Free()
	}
	// A plain lock is not fair.
	l, err = m.TryLock(res, 10*time.Second)
	wantNoErr(t, "plain TryLock", err)
	defer l.Free()
	if _, ok := l.Ticket(); l.IsFair() || ok {
		t.Fatal("a plain lock is fair or has a ticket")
	}
	wantNoErr(t, "plain Unlock", l.Unlock())
	var nilLock *redlock.Lock
	if _, ok := nilLock.Ticket(); ok || nilLock.IsFair() {
		t.Fatal("a nil Lock has a ticket or is fair")
	}
}

// Four waiters, each started once the one before has queued on a majority, are granted the
// lock in that order once the holder releases it, each with a larger ticket than the one
// before, each woken by the release before it; their entries leave the queues with them.
func TestFairWaitersGrantedInQueueOrder(t *testing.T) {
	t.Parallel()
	// A 5 s retry delay and a long drop-out time: only a wake-up hands the lock on quickly.
	m := newManager(t, sharedNodes, redlock.WithRetry(3, 5*time.Second))
	res := uniq(t)
	holder, err := m.TryLock(res, 30*time.Second, redlock.WithFair())
	wantNoErr(t, "holder", err)
	defer holder.Free()
	var w fairWaiters
	for i := 0; i < 4; i++ {
		w.start(m, res, i)
		waitQueued(t, sharedNodes, res, int64(i+1))
	}
	if got := w.order(); len(got) != 0 {
		t.Fatalf("granted while the holder held it: %v", got)
	}
	released := time.Now()
	wantNoErr(t, "holder Unlock", holder.Unlock())
	w.wait(t)
	took := time.Since(released)
	t.Logf("4 fair waiters served in %v after the release", took)
	if got := w.order(); !equalInts(got, []int{0, 1, 2, 3}) {
		t.Fatalf("grant order %v, want [0 1 2 3]", got)
	}
	for i, g := range w.grants {
		if !g.hasTicket {
			t.Fatalf("waiter %d has no ticket", g.i)
		}
		if i > 0 && g.ticket <= w.grants[i-1].ticket {
			t.Fatalf("tickets not increasing in queue order: %+v", w.grants)
		}
	}
	if took > 20*time.Second {
		t.Fatalf("the waiters took %v: not woken by the releases", took)
	}
	waitQueueGone(t, sharedNodes, res)
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A release wakes the next waiter only: three waiters, each with a manager of its own, asleep
// (none refreshes its place during the test); after the holder's release the first is
// granted the lock, and the others' managers make no attempt at all.
func TestFairReleaseWakesNextWaiterOnly(t *testing.T) {
	t.Parallel()
	holderMgr := newManager(t, sharedNodes)
	res := uniq(t)
	holder, err := holderMgr.TryLock(res, 30*time.Second, redlock.WithFair())
	wantNoErr(t, "holder", err)
	defer holder.Free()
	w := fairWaiters{release: make(chan struct{})}
	released := false
	defer func() {
		if !released {
			close(w.release)
		}
	}()
	var mgrs []*redlock.Manager
	for i := 0; i < 3; i++ {
		m := newManager(t, sharedNodes, redlock.WithRetry(3, 5*time.Second))
		mgrs = append(mgrs, m)
		w.start(m, res, i)
		waitQueued(t, sharedNodes, res, int64(i+1))
	}
	attempts := func() []int {
		var n []int
		for _, m := range mgrs {
			n = append(n, metric(t, m, "redlock_acquire_attempts_total"))
		}
		return n
	}
	// Every waiter asleep: the attempt counts settle.
	before := attempts()
	if !eventually(30*time.Second, func() bool {
		time.Sleep(300 * time.Millisecond)
		now := attempts()
		settled := equalInts(now, before)
		before = now
		return settled
	}) {
		t.Fatal("the waiters' attempts never settled")
	}
	wantNoErr(t, "holder Unlock", holder.Unlock())
	if !eventually(10*time.Second, func() bool { return len(w.order()) > 0 }) {
		t.Fatal("no waiter was granted the lock after the release")
	}
	time.Sleep(300 * time.Millisecond)
	after := attempts()
	t.Logf("attempts of each waiter's manager: %v before the release, %v after", before, after)
	if got := w.order(); !equalInts(got, []int{0}) {
		t.Fatalf("granted %v after the release, want [0]", got)
	}
	if after[1] != before[1] || after[2] != before[2] {
		t.Fatalf("attempts %v before the release, %v after: a waiter other than the next one attempted", before, after)
	}
	close(w.release)
	released = true
	w.wait(t)
	if got := w.order(); !equalInts(got, []int{0, 1, 2}) {
		t.Fatalf("grant order %v, want [0 1 2]", got)
	}
	waitQueueGone(t, sharedNodes, res)
}

// A waiter that gives up, because its wait runs out or its context is cancelled, leaves the
// queue at once; the next waiter is then granted the lock on the release, with a ticket.
func TestFairWaiterThatGivesUpLeavesQueue(t *testing.T) {
	t.Parallel()
	m := newManager(t, sharedNodes)
	res := uniq(t)
	holder, err := m.TryLock(res, 30*time.Second, redlock.WithFair())
	wantNoErr(t, "holder", err)
	defer holder.Free()

	_, err = m.LockWait(res, 10*time.Second, 300*time.Millisecond, redlock.WithFair())
	wantIs(t, "LockWait(300ms, WithFair) while held", err, redlock.ErrNotAcquired)
	waitQueueGone(t, sharedNodes, res)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := lockAsync(func() (*redlock.Lock, error) {
		return m.LockContext(ctx, res, 10*time.Second, redlock.WithFair())
	})
	waitQueued(t, sharedNodes, res, 1)
	cancel()
	r := waitResult(t, "cancelled LockContext(WithFair)", ch, 30*time.Second)
	wantIs(t, "cancelled LockContext(WithFair)", r.err, redlock.ErrCancelled)
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("the error %v does not match context.Canceled", r.err)
	}
	waitQueueGone(t, sharedNodes, res)

	// Nothing of theirs holds the next waiter up.
	ch = lockAsync(func() (*redlock.Lock, error) {
		return m.LockWait(res, 10*time.Second, time.Minute, redlock.WithFair())
	})
	waitQueued(t, sharedNodes, res, 1)
	wantNoErr(t, "holder Unlock", holder.Unlock())
	r = waitResult(t, "the next waiter", ch, 30*time.Second)
	wantNoErr(t, "the next waiter", r.err)
	defer r.l.Free()
	if _, ok := r.l.Ticket(); !ok || !r.l.IsFair() {
		t.Fatal("the waiter that queued has no ticket")
	}
	if s := r.l.String(); !strings.Contains(s, ", fair, ticket: ") {
		t.Fatalf("String() = %q", s)
	}
	wantNoErr(t, "the next waiter's Unlock", r.l.Unlock())
	waitQueueGone(t, sharedNodes, res)
}

// Bad fair options are ErrInvalidArgument from every method, before anything is sent: a
// drop-out time out of range or without WithFair, WithFair with WithOwner or WithShared (in
// either order), and WithFair for several resources or a semaphore's permit.
func TestFairBadInput(t *testing.T) {
	t.Parallel()
	m := newManager(t, sharedNodes)
	res := uniq(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fair := redlock.WithFair()
	bad := []struct {
		name string
		opts []redlock.LockOption
		says string
	}{
		{"drop-out below the minimum", []redlock.LockOption{fair, redlock.WithDropOut(redlock.MinDropOut - time.Millisecond)}, "drop-out time must be"},
		{"drop-out of 1 ns", []redlock.LockOption{fair, redlock.WithDropOut(time.Nanosecond)}, "drop-out time must be"},
		{"drop-out above the maximum", []redlock.LockOption{fair, redlock.WithDropOut(redlock.MaxDropOut + time.Millisecond)}, "drop-out time must be"},
		{"negative drop-out", []redlock.LockOption{fair, redlock.WithDropOut(-time.Second)}, "drop-out time must be"},
		{"drop-out without WithFair", []redlock.LockOption{redlock.WithDropOut(time.Second)}, "a drop-out time is for a fair lock's waiters"},
		{"WithFair and WithOwner", []redlock.LockOption{fair, redlock.WithOwner("job-1")}, "neither reentrant nor shared"},
		{"WithOwner and WithFair", []redlock.LockOption{redlock.WithOwner("job-1"), fair}, "neither reentrant nor shared"},
		{"WithFair and WithShared", []redlock.LockOption{redlock.WithShared(), fair}, "neither reentrant nor shared"},
	}
	methods := map[string]func(...redlock.LockOption) (*redlock.Lock, error){
		"Acquire": func(o ...redlock.LockOption) (*redlock.Lock, error) { return m.Acquire(res, time.Second, o...) },
		"Lock":    func(o ...redlock.LockOption) (*redlock.Lock, error) { return m.Lock(res, time.Second, o...) },
		"TryLock": func(o ...redlock.LockOption) (*redlock.Lock, error) { return m.TryLock(res, time.Second, o...) },
		"LockWait": func(o ...redlock.LockOption) (*redlock.Lock, error) {
			return m.LockWait(res, time.Second, time.Second, o...)
		},
		"LockContext": func(o ...redlock.LockOption) (*redlock.Lock, error) {
			return m.LockContext(ctx, res, time.Second, o...)
		},
	}
	for _, b := range bad {
		for method, acquire := range methods {
			l, err := acquire(b.opts...)
			if l != nil {
				t.Fatalf("%s with %s returned a lock", method, b.name)
			}
			wantIs(t, method+" with "+b.name, err, redlock.ErrInvalidArgument)
			if !strings.Contains(err.Error(), b.says) {
				t.Fatalf("%s with %s: message %q, want it to say %q", method, b.name, err, b.says)
			}
		}
	}
	// Several resources, a semaphore's permit.
	many := []string{res + "/a", res + "/b"}
	_, err := m.AcquireMany(many, time.Second, fair)
	wantIs(t, "AcquireMany(WithFair)", err, redlock.ErrInvalidArgument)
	if !strings.Contains(err.Error(), "for fair locks, acquire each resource on its own") {
		t.Fatalf("AcquireMany(WithFair): message %q", err)
	}
	_, err = m.TryLockMany(many, time.Second, fair, redlock.WithDropOut(time.Second))
	wantIs(t, "TryLockMany(WithFair, WithDropOut)", err, redlock.ErrInvalidArgument)
	sem, err := m.Semaphore(res, 2)
	wantNoErr(t, "Semaphore", err)
	for what, acquire := range map[string]func() (*redlock.Lock, error){
		"Semaphore.Acquire(WithFair)":    func() (*redlock.Lock, error) { return sem.Acquire(time.Second, fair) },
		"Semaphore.TryAcquire(WithFair)": func() (*redlock.Lock, error) { return sem.TryAcquire(time.Second, fair) },
		"Semaphore.AcquireContext(WithFair)": func() (*redlock.Lock, error) {
			return sem.AcquireContext(ctx, time.Second, fair)
		},
		"Semaphore.Acquire(WithDropOut)": func() (*redlock.Lock, error) {
			return sem.Acquire(time.Second, redlock.WithDropOut(time.Second))
		},
	} {
		l, err := acquire()
		if l != nil {
			t.Fatalf("%s returned a permit", what)
		}
		wantIs(t, what, err, redlock.ErrInvalidArgument)
	}
	if a := metric(t, m, "redlock_acquire_attempts_total"); a != 0 {
		t.Fatalf("invalid calls made %d attempts", a)
	}
	if n := present(t, sharedNodes, res); n != 0 {
		t.Fatalf("the key is on %d nodes", n)
	}
	// The bounds themselves, and 0 (the default), are fine.
	for _, d := range []time.Duration{0, redlock.MinDropOut, redlock.DefaultDropOut, redlock.MaxDropOut} {
		l, err := m.TryLock(res, time.Second, fair, redlock.WithDropOut(d))
		wantNoErr(t, "TryLock(WithFair, WithDropOut("+d.String()+"))", err)
		wantNoErr(t, "Unlock", l.Unlock())
		l.Free()
	}
}
