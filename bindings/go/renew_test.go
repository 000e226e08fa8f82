package redlock_test

import (
	"math"
	"sync/atomic"
	"testing"
	"time"

	redlock "github.com/redlock-quorum/redlock/bindings/go"
)

// A 1 s lock held for 2.5 s through auto-renewal: it stays valid, the nodes keep it, nobody
// else gets it, and it is never reported lost.
func TestAutoRenewKeepsTheLock(t *testing.T) {
	t.Parallel()
	m := newManager(t, sharedNodes)
	other := newManager(t, sharedNodes, redlock.WithRetry(0, 0))
	res := uniq(t)
	l, err := m.Lock(res, time.Second)
	wantNoErr(t, "Lock", err)
	defer l.Free()
	var called atomic.Int32
	wantNoErr(t, "AutoRenew", l.AutoRenew(0, 0, func() { called.Add(1) }))

	deadline := time.Now().Add(2500 * time.Millisecond)
	for time.Now().Before(deadline) {
		if !l.Valid() {
			t.Fatalf("the auto-renewed lock became invalid (lost: %v)", l.IsLost())
		}
		if _, err := other.TryLock(res, time.Second); err == nil {
			t.Fatal("another manager acquired an auto-renewed lock")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := holding(t, sharedNodes, res, l.Value()); n < 2 {
		t.Fatalf("after 2.5 s of a 1 s lock only %d nodes hold the token", n)
	}
	if l.IsLost() || l.WaitLost(0) || called.Load() != 0 {
		t.Fatal("reported lost while every node is up")
	}
	select {
	case <-l.Lost():
		t.Fatal("Lost() closed")
	default:
	}
	wantNoErr(t, "Unlock", l.Unlock()) // stops renewal first
	if !eventually(settle, func() bool { return present(t, sharedNodes, res) == 0 }) {
		t.Fatal("renewal recreated the key after Unlock")
	}
	time.Sleep(600 * time.Millisecond) // more than a renewal period: nothing comes back
	if n := present(t, sharedNodes, res); n != 0 {
		t.Fatalf("the key reappeared on %d nodes after Unlock", n)
	}
}

// A renewal bound is reported like a loss: before the validity ends, once.
func TestAutoRenewBounds(t *testing.T) {
	t.Parallel()
	m := newManager(t, sharedNodes)
	for name, renew := range map[string]func(*redlock.Lock, func()) error{
		"maxExtensions": func(l *redlock.Lock, f func()) error { return l.AutoRenew(0, 2, f) },
		"maxHold":       func(l *redlock.Lock, f func()) error { return l.AutoRenew(700*time.Millisecond, 0, f) },
	} {
		res := uniq(t) + "/" + name
		l, err := m.Lock(res, 600*time.Millisecond)
		wantNoErr(t, name+": Lock", err)
		calls := make(chan struct{}, 4)
		wantNoErr(t, name+": AutoRenew", renew(l, func() { calls <- struct{}{} }))
		if !l.WaitLost(5 * time.Second) {
			t.Fatalf("%s: not reported lost within 5 s", name)
		}
		select {
		case <-calls:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: onLost not called", name)
		}
		select {
		case <-l.Lost():
		default:
			t.Fatalf("%s: Lost() not closed", name)
		}
		if !l.IsLost() || l.Valid() || l.Validity() != 0 {
			t.Fatalf("%s: lost but IsLost %v, Valid %v", name, l.IsLost(), l.Valid())
		}
		wantIs(t, name+": Extend after loss", l.Extend(time.Second), redlock.ErrNotHeld)
		wantIs(t, name+": AutoRenew after loss", l.AutoRenew(0, 0, nil), redlock.ErrNotHeld)
		_ = l.Unlock() // clean up; the keys may still be there until their TTL
		time.Sleep(100 * time.Millisecond)
		if len(calls) != 0 {
			t.Fatalf("%s: onLost called more than once", name)
		}
		l.Free()
		if !l.IsLost() {
			t.Fatalf("%s: IsLost forgot the loss after Free", name)
		}
	}
}

// A majority of nodes killed: the loss is reported, before the last validity ends. A 5 s TTL:
// the loss is marked a twentieth of the TTL (at most 250 ms) before the validity ends, room
// for a renewal thread that a busy machine wakes late (a 1 s TTL leaves 50 ms).
func TestAutoRenewMajorityKilled(t *testing.T) {
	t.Parallel()
	servers := startCluster(t, 3)
	m := newManager(t, urls(servers))
	l, err := m.Lock(uniq(t), 5*time.Second)
	wantNoErr(t, "Lock", err)
	defer l.Free()
	lostAt := make(chan time.Time, 1)
	wantNoErr(t, "AutoRenew", l.AutoRenew(0, 0, func() { lostAt <- time.Now() }))
	time.Sleep(2 * time.Second) // at least one renewal (every third of the TTL)
	validUntil := time.Now().Add(l.Validity())
	servers[0].kill()
	servers[1].kill()
	select {
	case at := <-lostAt:
		if at.After(validUntil.Add(50 * time.Millisecond)) {
			t.Fatalf("loss reported %v after the validity ended", at.Sub(validUntil))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("loss not reported within 20 s of killing two nodes of three")
	}
	if !l.IsLost() || l.Valid() {
		t.Fatal("IsLost/Valid disagree with the callback")
	}
}

// StopRenewal, Free and bad arguments.
func TestAutoRenewStopFreeAndBadInput(t *testing.T) {
	t.Parallel()
	m := newManager(t, sharedNodes)
	res := uniq(t)

	// StopRenewal: the lock then simply expires; that is not a loss. (2 s TTLs here: a
	// shorter one can be lost to a renewal that a busy machine delays, or expire before the
	// checks below.)
	l, err := m.Lock(res+"/stop", 2*time.Second)
	wantNoErr(t, "Lock", err)
	wantNoErr(t, "AutoRenew", l.AutoRenew(0, 0, nil))
	time.Sleep(300 * time.Millisecond)
	l.StopRenewal()
	l.StopRenewal()
	if !eventually(10*time.Second, func() bool { return !l.Valid() && present(t, sharedNodes, res+"/stop") == 0 }) {
		t.Fatal("the lock did not expire after StopRenewal")
	}
	if l.IsLost() {
		t.Fatal("an expired lock reads as lost")
	}
	wantIs(t, "AutoRenew after expiry", l.AutoRenew(0, 0, nil), redlock.ErrNotHeld)
	l.Free()
	l.StopRenewal() // no-op after Free
	wantIs(t, "AutoRenew after Free", l.AutoRenew(0, 0, nil), redlock.ErrClosed)

	// Free stops renewal without unlocking: the key stays until its TTL, then goes.
	l, err = m.Lock(res+"/free", 2*time.Second)
	wantNoErr(t, "Lock", err)
	wantNoErr(t, "AutoRenew", l.AutoRenew(0, 0, nil))
	time.Sleep(200 * time.Millisecond)
	l.Free()
	if n := present(t, sharedNodes, res+"/free"); n < 2 {
		t.Fatalf("Free unlocked: the key is on %d nodes", n)
	}
	if !eventually(10*time.Second, func() bool { return present(t, sharedNodes, res+"/free") == 0 }) {
		t.Fatal("renewal went on after Free")
	}

	// Bad arguments are refused in Go; the lock is untouched.
	l, err = m.Lock(res+"/bad", 10*time.Second)
	wantNoErr(t, "Lock", err)
	defer l.Free()
	for name, err := range map[string]error{
		"maxHold < 0":          l.AutoRenew(-time.Millisecond, 0, nil),
		"maxHold > MaxTTL":     l.AutoRenew(redlock.MaxTTL+time.Millisecond, 0, nil),
		"maxExtensions < 0":    l.AutoRenew(0, -1, nil),
		"maxExtensions MinInt": l.AutoRenew(0, math.MinInt, nil),
	} {
		wantIs(t, "AutoRenew with "+name, err, redlock.ErrInvalidArgument)
	}
	// Replacing the settings works, and a nil Lock is a null argument.
	wantNoErr(t, "AutoRenew", l.AutoRenew(time.Minute, 10, nil))
	wantNoErr(t, "AutoRenew again", l.AutoRenew(0, 0, func() {}))
	wantNoErr(t, "Unlock", l.Unlock())
	var nilL *redlock.Lock
	wantIs(t, "nil Lock AutoRenew", nilL.AutoRenew(0, 0, nil), redlock.ErrNullArgument)
	nilL.StopRenewal()
	if nilL.IsLost() || nilL.WaitLost(time.Millisecond) || nilL.Lost() != nil {
		t.Fatal("nil Lock renewal accessors")
	}
}

// Many auto-renewed locks freed, unlocked and lost concurrently with renewals in flight: no
// crash, no race, no key left behind.
func TestAutoRenewConcurrentTeardown(t *testing.T) {
	t.Parallel()
	m := newManager(t, sharedNodes)
	res := uniq(t)
	const n = 24
	locks := make([]*redlock.Lock, 0, n)
	for i := 0; i < n; i++ {
		// 1 s: a shorter TTL can be lost to a renewal that a busy machine delays, and an
		// Unlock below then fails with ErrNotHeld.
		l, err := m.TryLock(res+"/"+string(rune('a'+i)), time.Second)
		wantNoErr(t, "TryLock", err)
		wantNoErr(t, "AutoRenew", l.AutoRenew(0, 0, func() {}))
		locks = append(locks, l)
	}
	time.Sleep(400 * time.Millisecond) // renewals are due every third of a second
	done := make(chan error, n)
	for i, l := range locks {
		go func(i int, l *redlock.Lock) {
			switch i % 3 {
			case 0:
				done <- l.Unlock()
				l.Free()
			case 1:
				l.Free() // stops renewal; the key expires
				done <- nil
			default:
				l.StopRenewal()
				done <- l.Unlock()
			}
		}(i, l)
	}
	for i := 0; i < n; i++ {
		select {
		case err := <-done:
			wantNoErr(t, "teardown", err)
		case <-time.After(10 * time.Second):
			t.Fatal("teardown hung")
		}
	}
	m.Close() // with locks of type 2 still allocated
	for i := 0; i < n; i++ {
		r := res + "/" + string(rune('a'+i))
		if !eventually(3*time.Second, func() bool { return present(t, sharedNodes, r) == 0 }) {
			t.Fatalf("key %q left behind", r)
		}
	}
}
