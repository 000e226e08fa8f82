package redlock_test

// Counting semaphores (Manager.Semaphore, Semaphore.Acquire, TryAcquire, AcquireWait,
// AcquireContext, Lock.Permit), checked against what the nodes hold: the slots, the bound on
// concurrent holders, waiting woken by a release, cancellation, the recorded permit count,
// bad input, and fencing, Extend and auto-renewal of a permit. Every wait is bounded.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	redlock "github.com/redlock-quorum/redlock/bindings/go"
)

// semKey is the key of the semaphore name on every node: a hash with a field "slot:<i>" per
// slot given and "hold:<token>" per permit held.
func semKey(name string) string { return "redlock-sem:" + lockKey(name) }

// semHolds returns the tokens of the permits of semaphore name held on each node (the
// "hold:<token>" fields of its hash, expired ones included until a script prunes them).
func semHolds(t testing.TB, nodes []string, name string) [][]string {
	t.Helper()
	var all [][]string
	for _, u := range nodes {
		v, err := respDo(addrOf(u), "HKEYS", semKey(name))
		if err != nil {
			t.Fatalf("HKEYS on %s: %v", u, err)
		}
		fields, _ := v.([]any)
		var tokens []string
		for _, f := range fields {
			if tok, ok := strings.CutPrefix(f.(string), "hold:"); ok {
				tokens = append(tokens, tok)
			}
		}
		slices.Sort(tokens)
		all = append(all, tokens)
	}
	return all
}

// semHolding returns how many of the nodes hold the permit with token in semaphore name.
func semHolding(t testing.TB, nodes []string, name, token string) int {
	t.Helper()
	n := 0
	for _, tokens := range semHolds(t, nodes, name) {
		if slices.Contains(tokens, token) {
			n++
		}
	}
	return n
}

// slotHolding returns on how many of the nodes slot of semaphore name is the hold of the
// permit with token.
func slotHolding(t testing.TB, nodes []string, name string, slot uint32, token string) int {
	t.Helper()
	n := 0
	for _, u := range nodes {
		v, err := respDo(addrOf(u), "HGET", semKey(name), fmt.Sprintf("slot:%d", slot))
		if err != nil {
			t.Fatalf("HGET on %s: %v", u, err)
		}
		if s, ok := v.(string); ok && s == token {
			n++
		}
	}
	return n
}

// checkPermit fails the test unless l is a permit of a semaphore of permits permits named
// name, and returns its slot.
func checkPermit(t testing.TB, what string, l *redlock.Lock, name string, permits uint32) uint32 {
	t.Helper()
	slot, n, ok := l.Permit()
	if !ok || n != permits || slot >= permits {
		t.Fatalf("%s: Permit() = %d, %d, %v, want a slot below %d of %d", what, slot, n, ok, permits, permits)
	}
	if l.Resource() != name || !slices.Equal(l.Resources(), []string{name}) || l.IsShared() {
		t.Fatalf("%s: Resource() = %q, Resources() = %q, IsShared() = %v", what, l.Resource(), l.Resources(), l.IsShared())
	}
	if !tokenRE.MatchString(l.Token()) || l.Value() != l.Token() || !l.Valid() || l.Granted() < 2 {
		t.Fatalf("%s: token %q, value %q, valid %v, granted %d", what, l.Token(), l.Value(), l.Valid(), l.Granted())
	}
	return slot
}

// Three permits of a semaphore of three hold distinct slots, each on the nodes; a fourth
// TryAcquire is ErrNotAcquired; once one is unlocked, the next TryAcquire gets its slot. A
// lock of the same name is independent of the semaphore.
func TestSemaphoreSlots(t *testing.T) {
	t.Parallel()
	m := newManager(t, sharedNodes)
	other := newManager(t, sharedNodes)
	name := uniq(t)
	sem, err := m.Semaphore(name, 3)
	wantNoErr(t, "Semaphore", err)
	if sem.Name() != name || sem.Permits() != 3 || sem.String() != fmt.Sprintf("redlock.Semaphore{name: %q, permits: 3}", name) {
		t.Fatalf("Name() = %q, Permits() = %d, String() = %q", sem.Name(), sem.Permits(), sem)
	}
	// Another manager's handle of the same semaphore shares its permits.
	otherSem, err := other.Semaphore(name, 3)
	wantNoErr(t, "Semaphore on another manager", err)

	var permits []*redlock.Lock
	slots := map[uint32]*redlock.Lock{}
	for i, s := range []*redlock.Semaphore{sem, otherSem, sem} {
		p, err := s.TryAcquire(10 * time.Second)
		wantNoErr(t, fmt.Sprintf("TryAcquire %d", i), err)
		defer p.Free()
		slot := checkPermit(t, fmt.Sprintf("permit %d", i), p, name, 3)
		if q, dup := slots[slot]; dup {
			t.Fatalf("permits %v and %v hold the same slot", q, p)
		}
		slots[slot] = p
		permits = append(permits, p)
		if s := p.String(); !strings.Contains(s, fmt.Sprintf("semaphore: %q, permit: slot %d of 3", name, slot)) {
			t.Fatalf("String() = %q", s)
		}
	}
	// Each permit's slot is its hold's on a quorum. Not always on every node: the managers
	// have connections of their own, so the other manager's permit can reach a node before
	// the late write of an earlier permit and take its slot there, and that node then drops
	// the earlier permit's hold (it only ever moves a hold to the slot the quorum chose).
	for i, p := range permits {
		slot, _, _ := p.Permit()
		if n := slotHolding(t, sharedNodes, name, slot, p.Token()); n < len(sharedNodes)/2+1 {
			t.Fatalf("permit %d has its slot %d on %d of %d nodes", i, slot, n, len(sharedNodes))
		}
	}

	_, err = sem.TryAcquire(10 * time.Second)
	wantIs(t, "a fourth TryAcquire", err, redlock.ErrNotAcquired)
	_, err = otherSem.TryAcquire(10 * time.Second)
	wantIs(t, "a fourth TryAcquire on the other manager", err, redlock.ErrNotAcquired)

	// The lock of the same name is not the semaphore.
	l, err := other.TryLock(name, 10*time.Second)
	wantNoErr(t, "TryLock of the semaphore's name", err)
	defer l.Free()
	if _, _, ok := l.Permit(); ok {
		t.Fatal("a lock says it is a permit")
	}
	wantNoErr(t, "Unlock of the lock", l.Unlock())

	// Unlock the second: its slot is the only one free, and the next permit gets it.
	freed, _, _ := permits[1].Permit()
	wantNoErr(t, "Unlock", permits[1].Unlock())
	if !eventually(settle, func() bool { return semHolding(t, sharedNodes, name, permits[1].Token()) == 0 }) {
		t.Fatal("the unlocked permit is still held on the nodes")
	}
	next, err := sem.TryAcquire(10 * time.Second)
	wantNoErr(t, "TryAcquire after an Unlock", err)
	defer next.Free()
	if slot := checkPermit(t, "the next permit", next, name, 3); slot != freed {
		t.Fatalf("the next permit got slot %d, want the freed slot %d", slot, freed)
	}
	_, err = otherSem.TryAcquire(10 * time.Second)
	wantIs(t, "TryAcquire with every permit held again", err, redlock.ErrNotAcquired)

	for _, p := range []*redlock.Lock{permits[0], permits[2], next} {
		wantNoErr(t, "Unlock", p.Unlock())
	}
	wantIs(t, "a second Unlock", permits[0].Unlock(), redlock.ErrNotHeld)
	if !eventually(settle, func() bool { return keyPresent(t, sharedNodes, semKey(name)) == 0 }) {
		t.Fatalf("the semaphore's key is left on %d nodes after every Unlock", keyPresent(t, sharedNodes, semKey(name)))
	}
	// Permit still answers after Free.
	next.Free()
	if slot, n, ok := next.Permit(); !ok || slot != freed || n != 3 {
		t.Fatalf("Permit() after Free = %d, %d, %v", slot, n, ok)
	}
}

// At most P: 8 goroutines on 4 managers take a permit of a semaphore of 2, 25 times each,
// counting themselves inside: never more than 2 at once, never two in one slot, and every
// goroutine is served every time.
func TestSemaphoreAtMostPermits(t *testing.T) {
	t.Parallel()
	const (
		permits    = 2
		goroutines = 8
		cycles     = 25
	)
	name := uniq(t)
	deadline := time.Now().Add(2 * time.Minute)
	var (
		inside, most atomic.Int32
		inSlot       [permits]atomic.Int32
		served       [goroutines]atomic.Int32
		wg           sync.WaitGroup
		errMu        sync.Mutex
		errs         []string
	)
	fail := func(format string, args ...any) {
		errMu.Lock()
		defer errMu.Unlock()
		if len(errs) < 20 {
			errs = append(errs, fmt.Sprintf(format, args...))
		}
	}
	var sems []*redlock.Semaphore
	for i := 0; i < goroutines/2; i++ {
		s, err := newManager(t, sharedNodes, redlock.WithRetry(3, 20*time.Millisecond)).Semaphore(name, permits)
		wantNoErr(t, "Semaphore", err)
		sems = append(sems, s)
	}
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			sem := sems[g%len(sems)]
			for c := 0; c < cycles; c++ {
				if time.Now().After(deadline) {
					fail("goroutine %d: cycle %d not reached before the deadline", g, c)
					return
				}
				p, err := sem.AcquireWait(10*time.Second, 60*time.Second)
				if err != nil {
					fail("goroutine %d cycle %d: AcquireWait: %v", g, c, err)
					return
				}
				slot, n, ok := p.Permit()
				if !ok || n != permits || slot >= permits {
					fail("goroutine %d: Permit() = %d, %d, %v", g, slot, n, ok)
				}
				now := inside.Add(1)
				for prev := most.Load(); now > prev && !most.CompareAndSwap(prev, now); prev = most.Load() {
				}
				if now > permits {
					fail("goroutine %d: %d holders inside at once", g, now)
				}
				if k := inSlot[slot%permits].Add(1); k != 1 {
					fail("goroutine %d: %d holders of slot %d at once", g, k, slot)
				}
				time.Sleep(time.Millisecond)
				if !p.Valid() {
					fail("goroutine %d: validity ran out inside", g)
				}
				inSlot[slot%permits].Add(-1)
				inside.Add(-1)
				if err := p.Unlock(); err != nil {
					fail("goroutine %d: Unlock: %v", g, err)
				}
				p.Free()
				served[g].Add(1)
			}
		}(g)
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Until(deadline) + 30*time.Second):
		t.Fatal("the goroutines did not finish")
	}
	for _, e := range errs {
		t.Error(e)
	}
	if t.Failed() {
		t.FailNow()
	}
	if n := most.Load(); n > permits || n < 1 {
		t.Fatalf("at most %d holders inside at once, want 1 to %d", n, permits)
	}
	for g := range served {
		if n := served[g].Load(); n != cycles {
			t.Fatalf("goroutine %d was served %d times, want %d", g, n, cycles)
		}
	}
	t.Logf("%d permits taken, at most %d holders at once", goroutines*cycles, most.Load())
	if !eventually(settle, func() bool { return keyPresent(t, sharedNodes, semKey(name)) == 0 }) {
		t.Fatal("the semaphore's key is left after every Unlock")
	}
}

// A waiter is woken by a release: with every permit held for 30 s and a 5 s retry delay,
// AcquireContext and AcquireWait get the released permit (its slot) well within 5 s of the
// holder's Unlock.
func TestSemaphoreWokenByRelease(t *testing.T) {
	t.Parallel()
	nodes := urls(startCluster(t, 3))
	holder := newManager(t, nodes)
	name := uniq(t)
	holderSem, err := holder.Semaphore(name, 2)
	wantNoErr(t, "Semaphore", err)
	for _, c := range []struct {
		name    string
		acquire func(s *redlock.Semaphore) (*redlock.Lock, error)
	}{
		{"AcquireContext", func(s *redlock.Semaphore) (*redlock.Lock, error) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			return s.AcquireContext(ctx, 10*time.Second, redlock.Fenced())
		}},
		{"AcquireWait", func(s *redlock.Semaphore) (*redlock.Lock, error) {
			return s.AcquireWait(10*time.Second, time.Minute)
		}},
		{"Acquire(Wait(1m))", func(s *redlock.Semaphore) (*redlock.Lock, error) {
			return s.Acquire(10*time.Second, redlock.Wait(time.Minute))
		}},
	} {
		// A manager of its own for each, so that its metrics count this waiter only.
		waiter := newManager(t, nodes, redlock.WithRetry(3, 5*time.Second))
		sem, err := waiter.Semaphore(name, 2)
		wantNoErr(t, c.name+": Semaphore", err)
		a, err := holderSem.TryAcquire(30 * time.Second)
		wantNoErr(t, c.name+": the holder's first permit", err)
		b, err := holderSem.TryAcquire(30 * time.Second)
		wantNoErr(t, c.name+": the holder's second permit", err)
		ch := lockAsync(func() (*redlock.Lock, error) { return c.acquire(sem) })
		waitUntilWaiting(t, waiter, ch)

		freed, _, _ := b.Permit()
		wantNoErr(t, c.name+": Unlock by the holder", b.Unlock())
		unlocked := time.Now()
		b.Free()
		r := waitResult(t, c.name, ch, time.Minute)
		handoff := r.at.Sub(unlocked)
		t.Logf("%s: got the permit %v after the holder's unlock", c.name, handoff)
		wantNoErr(t, c.name, r.err)
		if handoff > 5*time.Second {
			t.Fatalf("%s: got the permit %v after the unlock, want under 5 s", c.name, handoff)
		}
		if slot := checkPermit(t, c.name, r.l, name, 2); slot != freed {
			t.Fatalf("%s: got slot %d, want the released slot %d", c.name, slot, freed)
		}
		if n := semHolding(t, nodes, name, r.l.Token()); n < 2 {
			t.Fatalf("%s: the waiter's permit is held on %d nodes", c.name, n)
		}
		wantNoErr(t, c.name+": Unlock by the waiter", r.l.Unlock())
		r.l.Free()
		wantNoErr(t, c.name+": Unlock of the holder's first permit", a.Unlock())
		a.Free()
		if !eventually(settle, func() bool { return keyPresent(t, nodes, semKey(name)) == 0 }) {
			t.Fatalf("%s: the semaphore's key is left after every Unlock", c.name)
		}
	}
}

// AcquireContext ends with its context: a cancellation while it waits returns at once with
// ErrCancelled matching context.Canceled, a deadline with ErrNotAcquired matching
// context.DeadlineExceeded, and neither leaves a permit held on any node; a context that has
// ended already makes no attempt, and Close ends a waiting call with ErrClosed.
func TestSemaphoreAcquireContextCancel(t *testing.T) {
	t.Parallel()
	nodes := urls(startCluster(t, 3))
	holder := newManager(t, nodes)
	waiter := newManager(t, nodes)
	name := uniq(t)
	holderSem, err := holder.Semaphore(name, 2)
	wantNoErr(t, "Semaphore", err)
	sem, err := waiter.Semaphore(name, 2)
	wantNoErr(t, "Semaphore", err)

	// A context that has ended: no attempt.
	cancelled, cancel0 := context.WithCancel(context.Background())
	cancel0()
	_, err = sem.AcquireContext(cancelled, 10*time.Second)
	wantIs(t, "AcquireContext(cancelled)", err, redlock.ErrCancelled)
	wantIs(t, "AcquireContext(cancelled)", err, context.Canceled)
	if a := metric(t, waiter, "redlock_acquire_attempts_total"); a != 0 {
		t.Fatalf("%d attempts for a context that had ended", a)
	}

	a, err := holderSem.TryAcquire(30 * time.Second)
	wantNoErr(t, "the holder's first permit", err)
	defer a.Free()
	b, err := holderSem.TryAcquire(30 * time.Second)
	wantNoErr(t, "the holder's second permit", err)
	defer b.Free()
	held := []string{a.Token(), b.Token()}
	slices.Sort(held)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := lockAsync(func() (*redlock.Lock, error) { return sem.AcquireContext(ctx, 10*time.Second, redlock.Fenced()) })
	waitUntilWaiting(t, waiter, ch)
	cancelledAt := time.Now()
	cancel()
	r := waitResult(t, "AcquireContext after cancel", ch, 30*time.Second)
	latency := r.at.Sub(cancelledAt)
	t.Logf("AcquireContext returned %v after the context was cancelled: %v", latency, r.err)
	if r.l != nil {
		t.Fatal("AcquireContext returned a permit while every permit was held")
	}
	wantIs(t, "AcquireContext", r.err, redlock.ErrCancelled)
	wantIs(t, "AcquireContext", r.err, context.Canceled)
	if errors.Is(r.err, redlock.ErrNotAcquired) || errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("a cancellation matches ErrNotAcquired or DeadlineExceeded: %v", r.err)
	}
	if latency > 2*time.Second {
		t.Fatalf("AcquireContext returned %v after the cancellation, want at once", latency)
	}
	if n := metric(t, waiter, `redlock_acquire_total{result="cancelled"}`); n != 1 {
		t.Fatalf(`redlock_acquire_total{result="cancelled"} is %d, want 1`, n)
	}

	// A deadline that passes while it waits.
	dctx, dcancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer dcancel()
	_, err = sem.AcquireContext(dctx, 10*time.Second)
	wantIs(t, "AcquireContext past its deadline", err, redlock.ErrNotAcquired)
	wantIs(t, "AcquireContext past its deadline", err, context.DeadlineExceeded)
	if errors.Is(err, redlock.ErrCancelled) {
		t.Fatalf("a deadline matches ErrCancelled: %v", err)
	}

	// Close ends a waiting AcquireContext with ErrClosed.
	closing, err := redlock.New(nodes, testTimeouts)
	wantNoErr(t, "New", err)
	closingSem, err := closing.Semaphore(name, 2)
	wantNoErr(t, "Semaphore", err)
	ch = lockAsync(func() (*redlock.Lock, error) { return closingSem.AcquireContext(context.Background(), 10*time.Second) })
	waitUntilWaiting(t, closing, ch)
	closing.Close()
	if r := waitResult(t, "AcquireContext during Close", ch, 30*time.Second); r.err != redlock.ErrClosed {
		t.Fatalf("AcquireContext during Close: %v, %v", r.l, r.err)
	}
	if _, err := closingSem.TryAcquire(time.Second); err != redlock.ErrClosed {
		t.Fatalf("TryAcquire after Close: %v", err)
	}

	// Nothing but the holder's two permits is held on any node; after its unlocks, nothing.
	for i, tokens := range semHolds(t, nodes, name) {
		if !slices.Equal(tokens, held) {
			t.Fatalf("node %d holds permits %q, want only the holder's %q", i, tokens, held)
		}
	}
	wantNoErr(t, "Unlock by the holder", a.Unlock())
	wantNoErr(t, "Unlock by the holder", b.Unlock())
	if !eventually(settle, func() bool { return keyPresent(t, nodes, semKey(name)) == 0 }) {
		t.Fatalf("the semaphore's key is left on %d nodes after the holder's unlocks", keyPresent(t, nodes, semKey(name)))
	}
	// Uncontended, AcquireContext takes a permit at once.
	p, err := sem.AcquireContext(context.Background(), 5*time.Second)
	wantNoErr(t, "AcquireContext", err)
	defer p.Free()
	checkPermit(t, "AcquireContext's permit", p, name, 2)
	wantNoErr(t, "Unlock", p.Unlock())
}

// Every caller of a semaphore names the same count: while a permit of a semaphore of 3 is
// held, a call naming 4 is ErrInvalidArgument naming the recorded 3, and leaves nothing held;
// once no permit is held, the new count applies.
func TestSemaphoreCountMismatch(t *testing.T) {
	t.Parallel()
	m := newManager(t, sharedNodes)
	other := newManager(t, sharedNodes)
	name := uniq(t)
	three, err := m.Semaphore(name, 3)
	wantNoErr(t, "Semaphore(3)", err)
	four, err := other.Semaphore(name, 4)
	wantNoErr(t, "Semaphore(4)", err)

	p, err := three.TryAcquire(10 * time.Second)
	wantNoErr(t, "TryAcquire with 3", err)
	defer p.Free()
	if !eventually(settle, func() bool { return semHolding(t, sharedNodes, name, p.Token()) == len(sharedNodes) }) {
		t.Fatal("the permit is not held on every node")
	}
	for method, acquire := range map[string]func() (*redlock.Lock, error){
		"TryAcquire":     func() (*redlock.Lock, error) { return four.TryAcquire(10 * time.Second) },
		"Acquire":        func() (*redlock.Lock, error) { return four.Acquire(10 * time.Second) },
		"AcquireWait":    func() (*redlock.Lock, error) { return four.AcquireWait(10*time.Second, time.Second) },
		"AcquireContext": func() (*redlock.Lock, error) { return four.AcquireContext(context.Background(), 10*time.Second) },
	} {
		l, err := acquire()
		if l != nil {
			t.Fatalf("%s with 4 returned a permit", method)
		}
		wantIs(t, method+" with 4 while 3 are recorded", err, redlock.ErrInvalidArgument)
		var e *redlock.Error
		if !errors.As(err, &e) || e.Status != redlock.StatusInvalidArgument {
			t.Fatalf("%s: errors.As: %#v", method, err)
		}
		// "on 3 of 3 nodes", or 2 of 3 when the round was decided before the third answered.
		if msg := err.Error(); !strings.Contains(msg, "this semaphore has 3 permits on ") || !strings.Contains(msg, " of 3 nodes, and this call named 4: ") {
			t.Fatalf("%s: message %q, want it to name the recorded 3", method, msg)
		}
	}
	for i, tokens := range semHolds(t, sharedNodes, name) {
		if !slices.Equal(tokens, []string{p.Token()}) {
			t.Fatalf("node %d holds %q, want only the permit of 3", i, tokens)
		}
	}

	// Once no permit is held, 4 applies, and then 3 is the one refused.
	wantNoErr(t, "Unlock", p.Unlock())
	if !eventually(settle, func() bool { return keyPresent(t, sharedNodes, semKey(name)) == 0 }) {
		t.Fatal("the semaphore's key is left after Unlock")
	}
	q, err := four.TryAcquire(10 * time.Second)
	wantNoErr(t, "TryAcquire with 4 once none is held", err)
	defer q.Free()
	checkPermit(t, "the permit of 4", q, name, 4)
	if !eventually(settle, func() bool { return semHolding(t, sharedNodes, name, q.Token()) == len(sharedNodes) }) {
		t.Fatal("the permit of 4 is not held on every node")
	}
	_, err = three.TryAcquire(10 * time.Second)
	wantIs(t, "TryAcquire with 3 while 4 are recorded", err, redlock.ErrInvalidArgument)
	if !strings.Contains(err.Error(), "has 4 permits") || !strings.Contains(err.Error(), "named 3") {
		t.Fatalf("message %q", err)
	}
	wantNoErr(t, "Unlock", q.Unlock())
}

// Bad input is ErrInvalidArgument before anything is sent: a count of 0 or above MaxPermits,
// an empty or too long name (from Manager.Semaphore, which then returns no Semaphore), a bad
// TTL or wait, WithOwner and WithShared (from every method), and the wait options where the
// method fixes the wait. MaxPermits permits are fine. Nil and zero Semaphores and nil
// Managers are ErrNullArgument; a closed Manager's Semaphore gives ErrClosed.
func TestSemaphoreBadInput(t *testing.T) {
	t.Parallel()
	m := newManager(t, sharedNodes)
	name := uniq(t)

	for _, c := range []struct {
		what    string
		name    string
		permits uint32
		message string
	}{
		{"0 permits", name, 0, "a semaphore has 1 to 1000 permits, not 0"},
		{"1001 permits", name, redlock.MaxPermits + 1, "a semaphore has 1 to 1000 permits, not 1001"},
		{"the largest uint32", name, 1<<32 - 1, "not 4294967295"},
		{"an empty name", "", 3, "name must not be empty"},
		{"a 1025-byte name", strings.Repeat("s", redlock.MaxResourceLen+1), 3, "1025 bytes, more than the maximum of 1024"},
	} {
		s, err := m.Semaphore(c.name, c.permits)
		if s != nil {
			t.Fatalf("Semaphore(%s) returned a Semaphore", c.what)
		}
		wantIs(t, "Semaphore("+c.what+")", err, redlock.ErrInvalidArgument)
		if !strings.Contains(err.Error(), c.message) {
			t.Fatalf("Semaphore(%s): message %q, want it to contain %q", c.what, err, c.message)
		}
	}

	sem, err := m.Semaphore(name, 3)
	wantNoErr(t, "Semaphore", err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	methods := map[string]func(time.Duration, ...redlock.LockOption) (*redlock.Lock, error){
		"Semaphore.Acquire":    sem.Acquire,
		"Semaphore.TryAcquire": sem.TryAcquire,
		"Semaphore.AcquireWait": func(ttl time.Duration, o ...redlock.LockOption) (*redlock.Lock, error) {
			return sem.AcquireWait(ttl, time.Second, o...)
		},
		"Semaphore.AcquireContext": func(ttl time.Duration, o ...redlock.LockOption) (*redlock.Lock, error) {
			return sem.AcquireContext(ctx, ttl, o...)
		},
	}
	for _, c := range []struct {
		what    string
		ttl     time.Duration
		opts    []redlock.LockOption
		message string // after the method's name, "" for any
	}{
		{"WithOwner", time.Second, []redlock.LockOption{redlock.WithOwner("job-1")}, "a semaphore's permit is neither reentrant, shared nor fair"},
		{"WithShared", time.Second, []redlock.LockOption{redlock.WithShared()}, "a semaphore's permit is neither reentrant, shared nor fair"},
		{"WithShared, Fenced", time.Second, []redlock.LockOption{redlock.Fenced(), redlock.WithShared()}, "a semaphore's permit is neither reentrant, shared nor fair"},
		{"WithOwner and WithShared", time.Second, []redlock.LockOption{redlock.WithOwner("job-1"), redlock.WithShared()}, ""},
		{"TTL 0", 0, nil, ""},
		{"TTL 2ms", 2 * time.Millisecond, nil, ""},
		{"TTL above the maximum", redlock.DefaultMaxTTL + time.Millisecond, nil, ""},
		{"OnLost without AutoRenew", time.Second, []redlock.LockOption{redlock.OnLost(func(*redlock.Lock) {})}, ""},
	} {
		for method, acquire := range methods {
			l, err := acquire(c.ttl, c.opts...)
			if l != nil {
				t.Fatalf("%s(%s) returned a permit", method, c.what)
			}
			wantIs(t, method+"("+c.what+")", err, redlock.ErrInvalidArgument)
			want := c.message
			if strings.HasPrefix(want, " ") { // the binding's own message names the method
				want = method + want
			}
			if want != "" && !strings.Contains(err.Error(), want) {
				t.Fatalf("%s(%s): message %q, want it to contain %q", method, c.what, err, want)
			}
		}
	}
	for what, opt := range map[string]redlock.LockOption{"NoWait": redlock.NoWait(), "Wait(1s)": redlock.Wait(time.Second)} {
		_, err := sem.TryAcquire(time.Second, opt)
		wantIs(t, "TryAcquire("+what+")", err, redlock.ErrInvalidArgument)
		if !strings.Contains(err.Error(), "Semaphore.TryAcquire does not take the Wait or NoWait option (use Semaphore.Acquire)") {
			t.Fatalf("TryAcquire(%s): message %q", what, err)
		}
		_, err = sem.AcquireWait(time.Second, time.Second, opt)
		wantIs(t, "AcquireWait("+what+")", err, redlock.ErrInvalidArgument)
	}
	_, err = sem.AcquireWait(time.Second, -time.Second)
	wantIs(t, "AcquireWait(-1s)", err, redlock.ErrInvalidArgument)
	_, err = sem.Acquire(time.Second, redlock.Wait(-time.Second))
	wantIs(t, "Acquire(Wait(-1s))", err, redlock.ErrInvalidArgument)
	_, err = sem.AcquireContext(nil, time.Second) //nolint:staticcheck // a nil context is what is tested
	wantIs(t, "AcquireContext(nil)", err, redlock.ErrInvalidArgument)
	if n := keyPresent(t, sharedNodes, semKey(name)); n != 0 {
		t.Fatalf("bad input reached the nodes: the semaphore's key is on %d nodes", n)
	}
	if a := metric(t, m, "redlock_acquire_attempts_total"); a != 0 {
		t.Fatalf("invalid calls made %d attempts", a)
	}

	// A name whose key falls in the library's own namespace is refused at the acquisition.
	bare := newManager(t, sharedNodes, redlock.WithKeyPrefix(""))
	reserved, err := bare.Semaphore("redlock-fence:"+name, 3)
	wantNoErr(t, "Semaphore of a reserved name (checked at the acquisition)", err)
	_, err = reserved.TryAcquire(time.Second)
	wantIs(t, "TryAcquire of a reserved name", err, redlock.ErrInvalidArgument)
	if !strings.Contains(err.Error(), "namespace") {
		t.Fatalf("TryAcquire of a reserved name: message %q", err)
	}

	// MaxPermits permits: a slot among them.
	most, err := m.Semaphore(name+":most", redlock.MaxPermits)
	wantNoErr(t, "Semaphore(MaxPermits)", err)
	p, err := most.TryAcquire(5*time.Second, redlock.Fenced())
	wantNoErr(t, "TryAcquire of MaxPermits", err)
	defer p.Free()
	checkPermit(t, "a permit of MaxPermits", p, name+":most", redlock.MaxPermits)
	wantNoErr(t, "Unlock", p.Unlock())

	// Nil and zero Semaphores, nil and closed Managers.
	var nilM *redlock.Manager
	if s, err := nilM.Semaphore(name, 3); s != nil || !errors.Is(err, redlock.ErrNullArgument) {
		t.Fatalf("nil Manager Semaphore: %v, %v", s, err)
	}
	var nilS *redlock.Semaphore
	if nilS.Name() != "" || nilS.Permits() != 0 || nilS.String() != "redlock.Semaphore(nil)" {
		t.Fatal("a nil Semaphore answers")
	}
	for what, s := range map[string]*redlock.Semaphore{"nil": nilS, "zero": {}} {
		_, err = s.TryAcquire(time.Second)
		wantIs(t, what+" Semaphore TryAcquire", err, redlock.ErrNullArgument)
		_, err = s.AcquireContext(ctx, time.Second)
		wantIs(t, what+" Semaphore AcquireContext", err, redlock.ErrNullArgument)
		_, err = s.AcquireContext(nil, time.Second) //nolint:staticcheck // a nil context is what is tested
		wantIs(t, what+" Semaphore AcquireContext(nil)", err, redlock.ErrNullArgument)
	}
	var nilL *redlock.Lock
	if slot, n, ok := nilL.Permit(); slot != 0 || n != 0 || ok {
		t.Fatal("a nil Lock is a permit")
	}
	closed := newManager(t, sharedNodes)
	closedSem, err := closed.Semaphore(name, 3)
	wantNoErr(t, "Semaphore", err)
	closed.Close()
	for what, acquire := range map[string]func() (*redlock.Lock, error){
		"Acquire":        func() (*redlock.Lock, error) { return closedSem.Acquire(time.Second) },
		"AcquireWait":    func() (*redlock.Lock, error) { return closedSem.AcquireWait(time.Second, time.Second) },
		"AcquireContext": func() (*redlock.Lock, error) { return closedSem.AcquireContext(ctx, time.Second) },
	} {
		if _, err := acquire(); err != redlock.ErrClosed {
			t.Fatalf("%s on a closed manager: %v, want ErrClosed", what, err)
		}
	}
	if s, err := closed.Semaphore(name, 3); err != nil || s.Permits() != 3 {
		t.Fatalf("Semaphore on a closed manager: %v, %v (it sends nothing)", s, err)
	}
}

// A permit with a fencing token: Fenced gives one, strictly greater for the next holder of
// the slot; Extend pushes the hold's expiry back on every node; AutoRenew keeps a 1 s permit
// past 2.5 s; Unlock frees it.
func TestSemaphoreFencedExtendRenew(t *testing.T) {
	t.Parallel()
	m := newManager(t, sharedNodes)
	name := uniq(t)
	sem, err := m.Semaphore(name, 2)
	wantNoErr(t, "Semaphore", err)

	p, err := sem.TryAcquire(time.Second, redlock.Fenced())
	wantNoErr(t, "fenced TryAcquire", err)
	defer p.Free()
	slot := checkPermit(t, "the fenced permit", p, name, 2)
	if p.FencingToken() == 0 || !strings.Contains(p.String(), "fencing token") {
		t.Fatalf("a fenced permit: token %d, %s", p.FencingToken(), p)
	}
	wantNoErr(t, "Extend", p.Extend(30*time.Second))
	if ttl := p.TTL(); ttl != 30*time.Second {
		t.Fatalf("TTL() after Extend(30s) = %v", ttl)
	}
	if !eventually(settle, func() bool {
		on := 0
		for _, u := range sharedNodes {
			v, err := respDo(addrOf(u), "PTTL", semKey(name))
			if n, ok := v.(int64); err == nil && ok && n >= 20_000 {
				on++
			}
		}
		return on == len(sharedNodes)
	}) {
		t.Fatal("the semaphore's key does not live 20 s more on every node after Extend(30s)")
	}
	time.Sleep(1200 * time.Millisecond) // past the first TTL: still held
	if !p.Valid() || semHolding(t, sharedNodes, name, p.Token()) < 2 {
		t.Fatalf("the extended permit: valid %v, held on %d nodes", p.Valid(), semHolding(t, sharedNodes, name, p.Token()))
	}
	wantNoErr(t, "Unlock", p.Unlock())
	wantIs(t, "Extend after Unlock", p.Extend(time.Second), redlock.ErrNotHeld)
	if !eventually(settle, func() bool { return keyPresent(t, sharedNodes, semKey(name)) == 0 }) {
		t.Fatal("the semaphore's key is left after Unlock")
	}

	// Both permits, fenced: the one in the first permit's slot has a greater token.
	a, err := sem.TryAcquire(10*time.Second, redlock.Fenced())
	wantNoErr(t, "fenced TryAcquire", err)
	defer a.Free()
	b, err := sem.TryAcquire(10*time.Second, redlock.Fenced())
	wantNoErr(t, "fenced TryAcquire", err)
	defer b.Free()
	same := a
	if s, _, _ := b.Permit(); s == slot {
		same = b
	}
	if s, _, _ := same.Permit(); s != slot || same.FencingToken() <= p.FencingToken() {
		t.Fatalf("the next holder of slot %d: slot %d, token %d, after token %d", slot, s, same.FencingToken(), p.FencingToken())
	}
	wantNoErr(t, "Unlock", a.Unlock())
	wantNoErr(t, "Unlock", b.Unlock())

	// Auto-renewal keeps a 1 s permit past several TTLs.
	r, err := sem.Acquire(time.Second, redlock.NoWait(), redlock.AutoRenew(time.Minute))
	wantNoErr(t, "Acquire with AutoRenew", err)
	defer r.Free()
	checkPermit(t, "the renewed permit", r, name, 2)
	time.Sleep(2500 * time.Millisecond)
	if r.IsLost() || !r.Renewing() || !r.Valid() {
		t.Fatalf("after 2.5 s of a 1 s permit: lost %v (%s), renewing %v, valid %v", r.IsLost(), r.LostReason(), r.Renewing(), r.Valid())
	}
	if n := semHolding(t, sharedNodes, name, r.Token()); n < 2 {
		t.Fatalf("the renewed permit is held on %d nodes", n)
	}
	wantNoErr(t, "Unlock of the renewed permit", r.Unlock())
	if !eventually(settle, func() bool { return keyPresent(t, sharedNodes, semKey(name)) == 0 }) {
		t.Fatal("the semaphore's key is left after the renewed permit's Unlock")
	}
}
