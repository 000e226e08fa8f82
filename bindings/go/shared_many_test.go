package redlock_test

// Shared (read) locks (WithShared) and locks of several resources at once (AcquireMany,
// LockMany, TryLockMany, LockManyWait, LockManyContext), against the shared servers, each test
// on resource names of its own, every wait bounded.

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

// intentKey is the key in which an exclusive locker that waits queues its intent on a
// resource, holding new shared lockers back.
func intentKey(resource string) string { return "redlock-intent:" + lockKey(resource) }

// keyPresent returns how many of the nodes have key (a raw key) at all.
func keyPresent(t testing.TB, nodes []string, key string) int {
	t.Helper()
	n := 0
	for _, u := range nodes {
		v, err := respDo(addrOf(u), "EXISTS", key)
		if err != nil {
			t.Fatalf("EXISTS %q on %s: %v", key, u, err)
		}
		if v == int64(1) {
			n++
		}
	}
	return n
}

// keyTypes returns the type of the resource's key on each node ("none", "string", "hash").
func keyTypes(t testing.TB, nodes []string, resource string) []string {
	t.Helper()
	var types []string
	for _, u := range nodes {
		v, err := respDo(addrOf(u), "TYPE", lockKey(resource))
		if err != nil {
			t.Fatalf("TYPE on %s: %v", u, err)
		}
		s, _ := v.(string)
		types = append(types, s)
	}
	return types
}

// minPTTL returns the shortest remaining TTL, in milliseconds, of the resource's key among
// the nodes that have it, and how many have it.
func minPTTL(t testing.TB, resource string) (least int64, on int) {
	t.Helper()
	least = -2
	for _, u := range sharedNodes {
		if p := pttl(t, u, resource); p != -2 {
			if on == 0 || p < least {
				least = p
			}
			on++
		}
	}
	return least, on
}

// hasHold returns how many of the nodes have the field "hold:<token>" in the resource's hash.
func hasHold(t testing.TB, nodes []string, resource, token string) int {
	t.Helper()
	n := 0
	for _, u := range nodes {
		v, err := respDo(addrOf(u), "HEXISTS", lockKey(resource), "hold:"+token)
		if err != nil {
			t.Fatalf("HEXISTS on %s: %v", u, err)
		}
		if v == int64(1) {
			n++
		}
	}
	return n
}

// Eight shared holders at once, from eight goroutines; an exclusive locker is refused, and one
// that waits (LockContext) queues its intent, which holds a new shared locker back, and gets
// in only after the last of the eight has unlocked. Then it excludes shared lockers until it
// unlocks.
func TestSharedHoldersThenExclusive(t *testing.T) {
	t.Parallel()
	m := newManager(t, sharedNodes)
	writerM := newManager(t, sharedNodes)
	res := uniq(t)
	const ttl = 30 * time.Second

	readers := make([]*redlock.Lock, 8)
	errs := make([]error, len(readers))
	var wg sync.WaitGroup
	for i := range readers {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			readers[i], errs[i] = m.TryLock(res, ttl, redlock.WithShared())
		}(i)
	}
	wg.Wait()
	for i, r := range readers {
		wantNoErr(t, fmt.Sprintf("shared TryLock %d", i), errs[i])
		defer r.Free()
		if !r.IsShared() || !r.Valid() || r.Granted() < 2 {
			t.Fatalf("reader %d: shared %v, valid %v, granted %d", i, r.IsShared(), r.Valid(), r.Granted())
		}
		if r.Value() != r.Token() {
			t.Fatalf("reader %d: a shared lock's value %q is not its token %q", i, r.Value(), r.Token())
		}
	}
	// Every hold is on the nodes (on a quorum at once, on the others once they have answered).
	if !eventually(settle, func() bool {
		for _, r := range readers {
			if hasHold(t, sharedNodes, res, r.Token()) != len(sharedNodes) {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("holds on the nodes: %v, want 8 on each", holds(t, res))
	}
	if types := keyTypes(t, sharedNodes, res); !slices.Equal(types, []string{"hash", "hash", "hash"}) {
		t.Fatalf("key types %v, want hashes", types)
	}
	if holder, ok := holdersOf(t, m, res).Holder(); !ok || holder.Kind != redlock.HolderShared || len(holder.ID) != 0 {
		t.Fatalf("Holders: %+v, %v, want HolderShared with no ID", holder, ok)
	}

	// An exclusive locker is refused at once; one that waits waits.
	_, err := writerM.TryLock(res, ttl)
	wantIs(t, "exclusive TryLock beside the readers", err, redlock.ErrNotAcquired)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	writer := lockAsync(func() (*redlock.Lock, error) { return writerM.LockContext(ctx, res, ttl) })
	if !eventually(10*time.Second, func() bool { return keyPresent(t, sharedNodes, intentKey(res)) >= 2 }) {
		t.Fatal("the waiting exclusive locker queued no intent")
	}
	_, err = m.TryLock(res, ttl, redlock.WithShared())
	wantIs(t, "a new shared TryLock behind the intent", err, redlock.ErrNotAcquired)

	// Seven of the eight unlock: the writer still waits.
	for _, r := range readers[:7] {
		wantNoErr(t, "reader Unlock", r.Unlock())
	}
	time.Sleep(300 * time.Millisecond)
	select {
	case r := <-writer:
		t.Fatalf("the writer returned beside a reader: %v, %v", r.l, r.err)
	default:
	}
	if h := hasHold(t, sharedNodes, res, readers[7].Token()); h < 2 {
		t.Fatalf("the last reader's hold is on %d nodes", h)
	}
	released := time.Now()
	wantNoErr(t, "the last reader's Unlock", readers[7].Unlock())
	got := waitResult(t, "the writer", writer, 15*time.Second)
	wantNoErr(t, "the writer's LockContext", got.err)
	w := got.l
	defer w.Free()
	if got.at.Before(released) {
		t.Fatalf("the writer got in %v before the last reader's unlock", released.Sub(got.at))
	}
	if w.IsShared() {
		t.Fatal("the writer's lock is shared")
	}
	if n := holding(t, sharedNodes, res, w.Value()); n < 2 {
		t.Fatalf("the writer's value is on %d nodes", n)
	}
	if !eventually(settle, func() bool { return keyPresent(t, sharedNodes, intentKey(res)) == 0 }) {
		t.Fatal("the writer's intent is still there after it got the lock")
	}
	_, err = m.TryLock(res, ttl, redlock.WithShared())
	wantIs(t, "shared TryLock beside the writer", err, redlock.ErrNotAcquired)
	wantNoErr(t, "the writer's Unlock", w.Unlock())

	// Shared again, with Extend; and the last unlock removes the key.
	r, err := m.TryLock(res, time.Second, redlock.WithShared())
	wantNoErr(t, "shared TryLock after the writer", err)
	defer r.Free()
	wantNoErr(t, "shared Extend", r.Extend(20*time.Second))
	// (The writer's key may have been on a node still when the shared lock reached it.)
	if !eventually(settle, func() bool { p, on := minPTTL(t, res); return p >= 10_000 && on >= 2 }) {
		p, on := minPTTL(t, res)
		t.Fatalf("PTTL %d ms on %d nodes after Extend(20s)", p, on)
	}
	wantNoErr(t, "shared Unlock", r.Unlock())
	if !eventually(settle, func() bool { return present(t, sharedNodes, res) == 0 }) {
		t.Fatal("the key is still there after every holder unlocked")
	}
}

// A shared lock has no owner: WithShared with WithOwner is ErrInvalidArgument from every
// method, in either order, and nothing reaches the nodes.
func TestSharedWithOwnerInvalid(t *testing.T) {
	t.Parallel()
	m := newManager(t, sharedNodes)
	res := uniq(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	both := []redlock.LockOption{redlock.WithShared(), redlock.WithOwner("job-1")}
	reversed := []redlock.LockOption{redlock.WithOwner("job-1"), redlock.Fenced(), redlock.WithShared()}
	for method, acquire := range map[string]func(...redlock.LockOption) (*redlock.Lock, error){
		"Acquire": func(o ...redlock.LockOption) (*redlock.Lock, error) { return m.Acquire(res, time.Second, o...) },
		"Lock":    func(o ...redlock.LockOption) (*redlock.Lock, error) { return m.Lock(res, time.Second, o...) },
		"TryLock": func(o ...redlock.LockOption) (*redlock.Lock, error) { return m.TryLock(res, time.Second, o...) },
		"LockWait": func(o ...redlock.LockOption) (*redlock.Lock, error) {
			return m.LockWait(res, time.Second, time.Second, o...)
		},
		"LockContext": func(o ...redlock.LockOption) (*redlock.Lock, error) {
			return m.LockContext(ctx, res, time.Second, o...)
		},
	} {
		for _, opts := range [][]redlock.LockOption{both, reversed} {
			l, err := acquire(opts...)
			if l != nil {
				t.Fatalf("%s returned a lock", method)
			}
			wantIs(t, method+" with WithShared and WithOwner", err, redlock.ErrInvalidArgument)
			if !strings.Contains(err.Error(), "a shared lock has no owner") {
				t.Fatalf("%s: message %q", method, err)
			}
		}
	}
	if n := present(t, sharedNodes, res); n != 0 {
		t.Fatalf("the key is on %d nodes", n)
	}
	if a := metric(t, m, "redlock_acquire_attempts_total"); a != 0 {
		t.Fatalf("invalid calls made %d attempts", a)
	}
	// Each alone is fine.
	for _, opt := range []redlock.LockOption{redlock.WithShared(), redlock.WithOwner("job-1")} {
		l, err := m.TryLock(res, time.Second, opt)
		wantNoErr(t, "TryLock with one of them", err)
		wantNoErr(t, "Unlock", l.Unlock())
		l.Free()
	}
}

// Two goroutines lock {a, b, c} and {c, b, a} 200 times each, while a third locks b alone:
// nobody deadlocks, every round ends within its wait, and no two of them ever hold b (the
// resource all three name) at once. While a set is held, each of its keys holds the lock's
// value on a quorum.
func TestLockManyNoDeadlockNoOverlap(t *testing.T) {
	t.Parallel()
	const rounds = 200
	base := uniq(t)
	a, b, c := base+":a", base+":b", base+":c"
	deadline := time.Now().Add(90 * time.Second)

	var (
		inside     atomic.Int32
		violations atomic.Int32
		sets       atomic.Int32
		singles    atomic.Int32
		stop       atomic.Bool
		wg         sync.WaitGroup
		errMu      sync.Mutex
		errs       []string
	)
	fail := func(format string, args ...any) {
		errMu.Lock()
		defer errMu.Unlock()
		if len(errs) < 20 {
			errs = append(errs, fmt.Sprintf(format, args...))
		}
	}
	// critical is a holder's section: it must be alone in it.
	critical := func(who string, l *redlock.Lock, check bool) {
		if n := inside.Add(1); n != 1 {
			violations.Add(1)
			fail("%s: %d holders of %s at once", who, n, b)
		}
		if check {
			for _, r := range l.Resources() {
				if n := holding(t, sharedNodes, r, l.Value()); n < 2 {
					violations.Add(1)
					fail("%s: %s holds its value on %d nodes", who, r, n)
				}
			}
		}
		time.Sleep(time.Millisecond)
		if !l.Valid() {
			fail("%s: validity ran out inside the critical section", who)
		}
		inside.Add(-1)
		if err := l.Unlock(); err != nil {
			fail("%s: Unlock: %v", who, err)
		}
		l.Free()
	}
	for g, set := range [][]string{{a, b, c}, {c, b, a}} {
		wg.Add(1)
		go func(g int, set []string) {
			defer wg.Done()
			m := newManager(t, sharedNodes, redlock.WithRetry(3, 10*time.Millisecond))
			who := fmt.Sprintf("set %d %v", g, set)
			for r := 0; r < rounds; r++ {
				if time.Now().After(deadline) {
					fail("%s: round %d not reached before the deadline", who, r)
					return
				}
				l, err := m.LockManyWait(set, 5*time.Second, 10*time.Second)
				if err != nil {
					fail("%s round %d: LockManyWait: %v", who, r, err)
					return
				}
				if got := l.Resources(); !slices.Equal(got, set) {
					fail("%s: Resources() = %q", who, got)
				}
				critical(who, l, r%20 == 0)
				sets.Add(1)
			}
		}(g, set)
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	var single sync.WaitGroup
	single.Add(1)
	go func() {
		defer single.Done()
		m := newManager(t, sharedNodes, redlock.WithRetry(3, 10*time.Millisecond))
		for !stop.Load() {
			l, err := m.LockWait(b, 5*time.Second, 10*time.Second)
			if err != nil {
				fail("plain locker of b: LockWait: %v", err)
				return
			}
			critical("plain locker of b", l, false)
			singles.Add(1)
		}
	}()
	select {
	case <-done:
	case <-time.After(time.Until(deadline) + 30*time.Second):
		stop.Store(true)
		t.Fatal("the set lockers did not finish: deadlock?")
	}
	stop.Store(true)
	single.Wait()
	for _, e := range errs {
		t.Error(e)
	}
	if v := violations.Load(); v != 0 {
		t.Fatalf("%d mutual-exclusion violations", v)
	}
	if n := sets.Load(); n != 2*rounds {
		t.Fatalf("%d sets acquired, want %d", n, 2*rounds)
	}
	if singles.Load() == 0 {
		t.Fatal("the plain locker of b never got in")
	}
	t.Logf("%d sets and %d plain locks of b", sets.Load(), singles.Load())
	for _, r := range []string{a, b, c} {
		if !eventually(settle, func() bool { return present(t, sharedNodes, r) == 0 }) {
			t.Fatalf("%s is left on %d nodes", r, present(t, sharedNodes, r))
		}
	}
}

// All or nothing: with a foreign value at redlock:b on 2 of the 3 nodes, {a, b, c} is not
// acquired, and no node is left with redlock:a or redlock:c (the node that granted the set
// took it back), nor with an intent; the foreign values are untouched. On 1 node only, the
// set is acquired on the other two.
func TestLockManyPartialFailure(t *testing.T) {
	t.Parallel()
	m := newManager(t, sharedNodes)
	base := uniq(t)
	a, b, c := base+":a", base+":b", base+":c"
	set := []string{a, b, c}
	const foreign = "someone-else"
	setForeign := func(nodes []string) {
		for _, u := range nodes {
			if v, err := respDo(addrOf(u), "SET", lockKey(b), foreign, "PX", "60000"); err != nil || v != "OK" {
				t.Fatalf("SET on %s: %v, %v", u, v, err)
			}
		}
	}
	t.Cleanup(func() {
		for _, u := range sharedNodes {
			_, _ = respDo(addrOf(u), "DEL", lockKey(b))
		}
	})
	clean := func(what string) {
		t.Helper()
		for _, r := range []string{a, c} {
			if !eventually(settle, func() bool { return present(t, sharedNodes, r) == 0 }) {
				t.Fatalf("%s: %s is left on %d nodes", what, lockKey(r), present(t, sharedNodes, r))
			}
		}
		for _, r := range set {
			if !eventually(settle, func() bool { return keyPresent(t, sharedNodes, intentKey(r)) == 0 }) {
				t.Fatalf("%s: an intent on %s is left behind", what, r)
			}
		}
	}

	setForeign(sharedNodes[:2])
	l, err := m.TryLockMany(set, 10*time.Second)
	if l != nil {
		t.Fatal("TryLockMany returned a lock")
	}
	wantIs(t, "TryLockMany with b held on 2 of 3 nodes", err, redlock.ErrNotAcquired)
	clean("TryLockMany")
	// A wait retries, queues intents, and gives up the same way.
	start := time.Now()
	_, err = m.LockManyWait(set, 10*time.Second, 400*time.Millisecond)
	wantIs(t, "LockManyWait with b held on 2 of 3 nodes", err, redlock.ErrNotAcquired)
	if el := time.Since(start); el < 400*time.Millisecond || el > 10*time.Second {
		t.Fatalf("LockManyWait(400ms) gave up after %v", el)
	}
	clean("LockManyWait")
	if n := keyHolding(t, sharedNodes, lockKey(b), foreign); n != 2 {
		t.Fatalf("the foreign value is on %d nodes, want 2", n)
	}
	if n := present(t, sharedNodes, b); n != 2 {
		t.Fatalf("redlock:b is on %d nodes, want only the 2 foreign ones", n)
	}

	// Foreign on one node: a quorum grants the set; that node refuses it.
	for _, u := range sharedNodes[:1] {
		if _, err := respDo(addrOf(u), "DEL", lockKey(b)); err != nil {
			t.Fatal(err)
		}
	}
	if n := keyHolding(t, sharedNodes, lockKey(b), foreign); n != 1 {
		t.Fatalf("the foreign value is on %d nodes, want 1", n)
	}
	l, err = m.TryLockMany(set, 10*time.Second)
	wantNoErr(t, "TryLockMany with b held on 1 of 3 nodes", err)
	defer l.Free()
	// The node with the foreign value refuses (or answers after the two grants decided).
	if o := l.NodeOutcomes(); l.Granted() != 2 || (o[1] != redlock.NodeRejected && o[1] != redlock.NodePending) {
		t.Fatalf("granted %d, outcomes %v", l.Granted(), o)
	}
	for _, r := range set {
		if n := holding(t, sharedNodes, r, l.Value()); n != 2 {
			t.Fatalf("%s holds the set's value on %d nodes, want 2", r, n)
		}
	}
	wantNoErr(t, "Unlock", l.Unlock())
	if n := keyHolding(t, sharedNodes, lockKey(b), foreign); n != 1 {
		t.Fatalf("after Unlock the foreign value is on %d nodes, want 1", n)
	}
	for _, r := range []string{a, c} {
		if !eventually(settle, func() bool { return present(t, sharedNodes, r) == 0 }) {
			t.Fatalf("%s is left after Unlock", r)
		}
	}
}

// A lock of several resources: Resources lists them (a copy), Resource is the first, every key
// holds its value; it excludes a plain, a shared and another set's lock of any one of them and
// is excluded by them; Extend and auto-renewal push every key's expiry back, and Unlock
// removes every key.
func TestLockManyResourcesExtendUnlock(t *testing.T) {
	t.Parallel()
	m := newManager(t, sharedNodes)
	other := newManager(t, sharedNodes)
	base := uniq(t)
	set := []string{base + ":x", base + ":y\x00\r\n", base + ":z"}
	given := slices.Clone(set)

	l, err := m.LockMany(set, 5*time.Second)
	wantNoErr(t, "LockMany", err)
	defer l.Free()
	set[0] = "changed by the caller"
	if got := l.Resources(); !slices.Equal(got, given) {
		t.Fatalf("Resources() = %q, want %q", got, given)
	}
	l.Resources()[1] = "changed"
	if got := l.Resources(); !slices.Equal(got, given) || l.Resource() != given[0] {
		t.Fatalf("Resources() = %q, Resource() = %q after changes to copies", got, l.Resource())
	}
	if l.IsShared() || l.FencingToken() != 0 || !tokenRE.MatchString(l.Token()) || !strings.HasPrefix(l.Value(), l.Token()+".") {
		t.Fatalf("shared %v, fence %d, token %q, value %q", l.IsShared(), l.FencingToken(), l.Token(), l.Value())
	}
	if s := l.String(); !strings.Contains(s, "resources: [") {
		t.Fatalf("String() = %q", s)
	}
	for _, r := range given {
		if !eventually(settle, func() bool { return holding(t, sharedNodes, r, l.Value()) == len(sharedNodes) }) {
			t.Fatalf("%q holds the value on %d nodes", r, holding(t, sharedNodes, r, l.Value()))
		}
	}
	if holder, ok := holdersOf(t, other, given[1]).Holder(); !ok || holder.Kind != redlock.HolderLock || string(holder.ID) != l.Value() {
		t.Fatalf("Holders of the second resource: %+v, %v", holder, ok)
	}

	// Excluded both ways.
	_, err = other.TryLock(given[1], time.Second)
	wantIs(t, "a plain lock of a resource of the set", err, redlock.ErrNotAcquired)
	_, err = other.TryLock(given[2], time.Second, redlock.WithShared())
	wantIs(t, "a shared lock of a resource of the set", err, redlock.ErrNotAcquired)
	_, err = other.TryLockMany([]string{base + ":w", given[2]}, time.Second)
	wantIs(t, "a set overlapping the set", err, redlock.ErrNotAcquired)
	if n := present(t, sharedNodes, base+":w"); n != 0 {
		t.Fatalf("the refused set left its other key on %d nodes", n)
	}
	shared, err := other.TryLock(base+":w", 10*time.Second, redlock.WithShared())
	wantNoErr(t, "a shared lock outside the set", err)
	defer shared.Free()
	_, err = m.TryLockMany([]string{base + ":v", base + ":w"}, time.Second)
	wantIs(t, "a set naming a shared-held resource", err, redlock.ErrNotAcquired)
	wantNoErr(t, "shared Unlock", shared.Unlock())

	// Extend acts on every key.
	wantNoErr(t, "Extend", l.Extend(30*time.Second))
	for _, r := range given {
		if !eventually(settle, func() bool { p, on := minPTTL(t, r); return p >= 20_000 && on == len(sharedNodes) }) {
			p, on := minPTTL(t, r)
			t.Fatalf("%q: PTTL %d ms on %d nodes after Extend(30s)", r, p, on)
		}
	}
	wantNoErr(t, "Unlock", l.Unlock())
	for _, r := range given {
		if !eventually(settle, func() bool { return present(t, sharedNodes, r) == 0 }) {
			t.Fatalf("%q is left on %d nodes after Unlock", r, present(t, sharedNodes, r))
		}
	}
	wantIs(t, "Extend after Unlock", l.Extend(time.Second), redlock.ErrNotHeld)
	wantIs(t, "a second Unlock", l.Unlock(), redlock.ErrNotHeld)
	l.Free()
	if got := l.Resources(); !slices.Equal(got, given) {
		t.Fatalf("Resources() after Free = %q", got)
	}

	// Auto-renewal keeps every key past several TTLs.
	r, err := m.AcquireMany(given, time.Second, redlock.NoWait(), redlock.AutoRenew(time.Minute))
	wantNoErr(t, "AcquireMany with AutoRenew", err)
	defer r.Free()
	time.Sleep(2500 * time.Millisecond)
	if r.IsLost() || !r.Renewing() || !r.Valid() {
		t.Fatalf("after 2.5 s of a 1 s lock: lost %v (%s), renewing %v, valid %v", r.IsLost(), r.LostReason(), r.Renewing(), r.Valid())
	}
	for _, k := range given {
		if n := holding(t, sharedNodes, k, r.Value()); n < 2 {
			t.Fatalf("%q holds the renewed value on %d nodes", k, n)
		}
	}
	wantNoErr(t, "Unlock of the renewed set", r.Unlock())
	for _, k := range given {
		if !eventually(settle, func() bool { return present(t, sharedNodes, k) == 0 }) {
			t.Fatalf("%q is left after the renewed set's Unlock", k)
		}
	}
}

// LockManyContext waits until its context ends: a cancellation ends the wait at once with
// ErrCancelled, a deadline with ErrNotAcquired, neither leaving a key; once the resource is
// released it gets the set.
func TestLockManyContext(t *testing.T) {
	t.Parallel()
	m := newManager(t, sharedNodes)
	holderM := newManager(t, sharedNodes)
	base := uniq(t)
	set := []string{base + ":a", base + ":b"}
	h, err := holderM.TryLock(set[1], 30*time.Second)
	wantNoErr(t, "the holder's TryLock", err)
	defer h.Free()

	ctx, cancel := context.WithCancel(context.Background())
	waiter := lockAsync(func() (*redlock.Lock, error) { return m.LockManyContext(ctx, set, 10*time.Second) })
	if !eventually(10*time.Second, func() bool { return metric(t, m, "redlock_acquire_retries_total") >= 1 }) {
		t.Fatal("the waiter never retried")
	}
	cancelled := time.Now()
	cancel()
	got := waitResult(t, "the cancelled LockManyContext", waiter, 10*time.Second)
	wantIs(t, "cancelled LockManyContext", got.err, redlock.ErrCancelled)
	wantIs(t, "cancelled LockManyContext", got.err, context.Canceled)
	if d := got.at.Sub(cancelled); d > 2*time.Second {
		t.Fatalf("LockManyContext returned %v after the cancellation", d)
	}

	dctx, dcancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer dcancel()
	_, err = m.LockManyContext(dctx, set, 10*time.Second)
	wantIs(t, "LockManyContext past its deadline", err, redlock.ErrNotAcquired)
	wantIs(t, "LockManyContext past its deadline", err, context.DeadlineExceeded)
	if !eventually(settle, func() bool { return present(t, sharedNodes, set[0]) == 0 }) {
		t.Fatal("a key of the set is left behind")
	}

	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel2()
	waiter = lockAsync(func() (*redlock.Lock, error) { return m.LockManyContext(ctx2, set, 10*time.Second) })
	time.Sleep(200 * time.Millisecond)
	wantNoErr(t, "the holder's Unlock", h.Unlock())
	got = waitResult(t, "LockManyContext after the release", waiter, 15*time.Second)
	wantNoErr(t, "LockManyContext after the release", got.err)
	defer got.l.Free()
	wantNoErr(t, "Unlock", got.l.Unlock())
}

// Bad input to the *Many methods is ErrInvalidArgument before anything is sent: no resources,
// more than MaxResources, a resource named twice, empty or too long, a bad TTL or wait, and
// the options they do not take. Exactly MaxResources resources are fine.
func TestLockManyBadInput(t *testing.T) {
	t.Parallel()
	m := newManager(t, sharedNodes)
	base := uniq(t)
	many := func(n int) []string {
		r := make([]string, n)
		for i := range r {
			r[i] = fmt.Sprintf("%s:%d", base, i)
		}
		return r
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	methods := map[string]func([]string, time.Duration, ...redlock.LockOption) (*redlock.Lock, error){
		"AcquireMany": m.AcquireMany,
		"LockMany":    m.LockMany,
		"TryLockMany": m.TryLockMany,
		"LockManyWait": func(r []string, ttl time.Duration, o ...redlock.LockOption) (*redlock.Lock, error) {
			return m.LockManyWait(r, ttl, time.Second, o...)
		},
		"LockManyContext": func(r []string, ttl time.Duration, o ...redlock.LockOption) (*redlock.Lock, error) {
			return m.LockManyContext(ctx, r, ttl, o...)
		},
	}
	dup := append(many(5), base+":2")
	cases := []struct {
		name      string
		resources []string
		ttl       time.Duration
		opts      []redlock.LockOption
		message   string
	}{
		{"nil", nil, time.Second, nil, "no resources"},
		{"empty list", []string{}, time.Second, nil, "no resources"},
		{"too many", many(redlock.MaxResources + 1), time.Second, nil, "1001 resources, more than the maximum of 1000"},
		{"duplicate", dup, time.Second, nil, fmt.Sprintf("resource 5 (%q) is resource 2 again", base+":2")},
		{"too long", []string{base, strings.Repeat("r", redlock.MaxResourceLen+1)}, time.Second, nil, "resource 1: resource name is 1025 bytes"},
		{"empty name", []string{base, ""}, time.Second, nil, ""},
		{"TTL 0", many(2), 0, nil, "TTL"},
		{"TTL above the maximum", many(2), redlock.DefaultMaxTTL + time.Millisecond, nil, ""},
		{"Fenced", many(2), time.Second, []redlock.LockOption{redlock.Fenced()}, "fenced"},
		{"WithOwner", many(2), time.Second, []redlock.LockOption{redlock.WithOwner("o")}, "reentrant"},
		{"WithShared", many(2), time.Second, []redlock.LockOption{redlock.WithShared()}, "shared"},
		{"OnLost without AutoRenew", many(2), time.Second, []redlock.LockOption{redlock.OnLost(func(*redlock.Lock) {})}, "AutoRenew"},
	}
	for _, c := range cases {
		for method, acquire := range methods {
			l, err := acquire(c.resources, c.ttl, c.opts...)
			if l != nil {
				t.Fatalf("%s(%s) returned a lock", method, c.name)
			}
			wantIs(t, method+"("+c.name+")", err, redlock.ErrInvalidArgument)
			if !strings.Contains(err.Error(), c.message) {
				t.Fatalf("%s(%s): message %q, want it to contain %q", method, c.name, err, c.message)
			}
		}
	}
	// The wait options where the method fixes the wait, and a bad wait.
	for name, opt := range map[string]redlock.LockOption{"NoWait": redlock.NoWait(), "Wait(1s)": redlock.Wait(time.Second)} {
		_, err := m.TryLockMany(many(2), time.Second, opt)
		wantIs(t, "TryLockMany("+name+")", err, redlock.ErrInvalidArgument)
		if !strings.Contains(err.Error(), "TryLockMany does not take the Wait or NoWait option (use AcquireMany)") {
			t.Fatalf("TryLockMany(%s): message %q", name, err)
		}
		_, err = m.LockManyWait(many(2), time.Second, time.Second, opt)
		wantIs(t, "LockManyWait("+name+")", err, redlock.ErrInvalidArgument)
	}
	_, err := m.LockManyWait(many(2), time.Second, -time.Second)
	wantIs(t, "LockManyWait(-1s)", err, redlock.ErrInvalidArgument)
	_, err = m.AcquireMany(many(2), time.Second, redlock.Wait(-time.Second))
	wantIs(t, "AcquireMany(Wait(-1s))", err, redlock.ErrInvalidArgument)
	_, err = m.LockManyContext(nil, many(2), time.Second) //nolint:staticcheck // a nil context is what is tested
	wantIs(t, "LockManyContext(nil)", err, redlock.ErrInvalidArgument)
	for _, r := range append(many(6), many(redlock.MaxResources + 1)[redlock.MaxResources]) {
		if n := present(t, sharedNodes, r); n != 0 {
			t.Fatalf("bad input reached the nodes (%s)", r)
		}
	}
	if a := metric(t, m, "redlock_acquire_attempts_total"); a != 0 {
		t.Fatalf("invalid calls made %d attempts", a)
	}

	// Exactly MaxResources: acquired, and every key released.
	all := many(redlock.MaxResources)
	l, err := m.TryLockMany(all, 10*time.Second)
	wantNoErr(t, "TryLockMany of MaxResources resources", err)
	defer l.Free()
	if got := l.Resources(); !slices.Equal(got, all) {
		t.Fatalf("Resources() has %d entries", len(got))
	}
	if n := holding(t, sharedNodes, all[redlock.MaxResources-1], l.Value()); n < 2 {
		t.Fatalf("the last resource holds the value on %d nodes", n)
	}
	wantNoErr(t, "Unlock", l.Unlock())
	if !eventually(settle, func() bool { return present(t, sharedNodes, all[0])+present(t, sharedNodes, all[999]) == 0 }) {
		t.Fatal("keys are left after Unlock")
	}

	// Nil and closed managers.
	var nilM *redlock.Manager
	_, err = nilM.LockMany(many(2), time.Second)
	wantIs(t, "nil Manager LockMany", err, redlock.ErrNullArgument)
	_, err = nilM.LockManyContext(ctx, many(2), time.Second)
	wantIs(t, "nil Manager LockManyContext", err, redlock.ErrNullArgument)
	closed := newManager(t, sharedNodes)
	closed.Close()
	if _, err := closed.TryLockMany(many(2), time.Second); !errors.Is(err, redlock.ErrClosed) {
		t.Fatalf("TryLockMany on a closed manager: %v, want ErrClosed", err)
	}
	if _, err := closed.LockManyContext(ctx, many(2), time.Second); !errors.Is(err, redlock.ErrClosed) {
		t.Fatalf("LockManyContext on a closed manager: %v, want ErrClosed", err)
	}
}

// HolderShared's name, and IsShared and Resources on nil and plain locks.
func TestSharedManyAccessors(t *testing.T) {
	t.Parallel()
	if s := redlock.HolderShared.String(); s != "shared" {
		t.Fatalf("HolderShared.String() = %q", s)
	}
	var nilL *redlock.Lock
	if nilL.IsShared() || nilL.Resources() != nil {
		t.Fatal("a nil Lock answers")
	}
	m := newManager(t, sharedNodes)
	res := uniq(t)
	l, err := m.TryLock(res, time.Second)
	wantNoErr(t, "TryLock", err)
	defer l.Free()
	if got := l.Resources(); !slices.Equal(got, []string{res}) || l.IsShared() {
		t.Fatalf("a plain lock: Resources() = %q, IsShared() = %v", got, l.IsShared())
	}
	wantNoErr(t, "Unlock", l.Unlock())
	s, err := m.TryLock(res, time.Second, redlock.WithShared(), redlock.Fenced())
	wantNoErr(t, "shared fenced TryLock", err)
	defer s.Free()
	if !s.IsShared() || s.FencingToken() == 0 || !strings.Contains(s.String(), ", shared") {
		t.Fatalf("a shared fenced lock: IsShared %v, token %d, %s", s.IsShared(), s.FencingToken(), s)
	}
	wantNoErr(t, "Unlock", s.Unlock())
	s.Free()
	if !s.IsShared() {
		t.Fatal("IsShared changed at Free")
	}
}
