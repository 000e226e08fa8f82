package redlock_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	redlock "github.com/redlock-quorum/redlock/bindings/go"
)

// Acquire with each option alone, and with none: the lock is on the nodes, and the options
// show on the Lock.
func TestAcquireEachOption(t *testing.T) {
	t.Parallel()
	m := newManager(t, sharedNodes)
	onLost := redlock.OnLost(func(*redlock.Lock) {})
	for _, c := range []struct {
		name            string
		opts            []redlock.LockOption
		fenced, renewed bool
	}{
		{"none", nil, false, false},
		{"NoWait", []redlock.LockOption{redlock.NoWait()}, false, false},
		{"Wait(2s)", []redlock.LockOption{redlock.Wait(2 * time.Second)}, false, false},
		{"Wait(0)", []redlock.LockOption{redlock.Wait(0)}, false, false},
		{"Fenced", []redlock.LockOption{redlock.Fenced()}, true, false},
		{"AutoRenew", []redlock.LockOption{redlock.AutoRenew(time.Minute)}, false, true},
		{"MaxExtensions", []redlock.LockOption{redlock.AutoRenew(0), redlock.MaxExtensions(100)}, false, true},
		{"OnLost", []redlock.LockOption{redlock.AutoRenew(0), onLost}, false, true},
		{"all", []redlock.LockOption{redlock.Wait(time.Second), redlock.Fenced(), redlock.AutoRenew(time.Minute),
			redlock.MaxExtensions(100), onLost}, true, true},
		{"nil options", []redlock.LockOption{nil, redlock.NoWait(), nil}, false, false},
	} {
		res := uniq(t) + "/" + c.name
		l, err := m.Acquire(res, 5*time.Second, c.opts...)
		wantNoErr(t, "Acquire with "+c.name, err)
		if !tokenRE.MatchString(l.Token()) || l.Resource() != res || !l.Valid() || l.TTL() != 5*time.Second {
			t.Fatalf("%s: token %q, resource %q, valid %v, TTL %v", c.name, l.Token(), l.Resource(), l.Valid(), l.TTL())
		}
		if n := holding(t, sharedNodes, res, l.Value()); n < 2 {
			t.Fatalf("%s: %d nodes hold the token", c.name, n)
		}
		if (l.FencingToken() != 0) != c.fenced || l.Renewing() != c.renewed || l.IsLost() {
			t.Fatalf("%s: FencingToken %d, Renewing %v, IsLost %v", c.name, l.FencingToken(), l.Renewing(), l.IsLost())
		}
		wantNoErr(t, c.name+": Unlock", l.Unlock())
		if l.Renewing() {
			t.Fatalf("%s: still renewing after Unlock", c.name)
		}
		l.Free()
		if n := present(t, sharedNodes, res); n != 0 {
			t.Fatalf("%s: the key is still on %d nodes after Unlock", c.name, n)
		}
	}
}

// Wait lets a waiter get the lock once the holder releases it; NoWait (and Wait(0)) make one
// attempt however generous the retry policy. Attempts are counted with the managers' metrics,
// so nothing depends on how fast the machine is.
func TestAcquireWaitAndNoWait(t *testing.T) {
	t.Parallel()
	holder := newManager(t, sharedNodes)
	res := uniq(t)
	held, err := holder.Acquire(res, 30*time.Second, redlock.NoWait())
	wantNoErr(t, "Acquire", err)
	defer held.Free()

	// NoWait: one attempt, where the retry policy would make 51.
	slow := newManager(t, sharedNodes, redlock.WithRetry(50, 10*time.Millisecond))
	for i, c := range []struct {
		name string
		opts []redlock.LockOption
	}{
		{"NoWait", []redlock.LockOption{redlock.NoWait()}},
		{"Wait(0)", []redlock.LockOption{redlock.Wait(0)}},
		{"Wait(1h) then NoWait", []redlock.LockOption{redlock.Wait(time.Hour), redlock.NoWait()}},
		{"Fenced, NoWait", []redlock.LockOption{redlock.Fenced(), redlock.NoWait()}},
	} {
		l, err := slow.Acquire(res, time.Second, c.opts...)
		if l != nil {
			t.Fatalf("%s: acquired a held lock", c.name)
		}
		wantIs(t, c.name, err, redlock.ErrNotAcquired)
		if a := metric(t, slow, "redlock_acquire_attempts_total"); a != i+1 {
			t.Fatalf("%s: %d attempts in %d calls, want one each", c.name, a, i+1)
		}
	}
	// Lock is Acquire: it takes NoWait too.
	_, err = slow.Lock(res, time.Second, redlock.NoWait())
	wantIs(t, "Lock(NoWait)", err, redlock.ErrNotAcquired)
	if a := metric(t, slow, "redlock_acquire_attempts_total"); a != 5 {
		t.Fatalf("Lock(NoWait): %d attempts in 5 calls, want one each", a)
	}
	// Without a wait option: the retry policy.
	_, err = slow.Acquire(res, time.Second)
	wantIs(t, "Acquire with the retry policy", err, redlock.ErrNotAcquired)
	if r := metric(t, slow, "redlock_acquire_retries_total"); r != 50 {
		t.Fatalf("the retry policy made %d retries, want 50", r)
	}

	// Wait gives up once its time has passed, not before.
	waiter := newManager(t, sharedNodes, redlock.WithRetry(0, 20*time.Millisecond))
	start := time.Now()
	_, err = waiter.Acquire(res, time.Second, redlock.Wait(300*time.Millisecond))
	elapsed := time.Since(start)
	wantIs(t, "Acquire(Wait(300ms))", err, redlock.ErrNotAcquired)
	if elapsed < 290*time.Millisecond {
		t.Fatalf("Wait(300ms) gave up after %v", elapsed)
	}

	// Released while the waiter waits: it gets the lock. The holder releases only once the
	// waiter is known to be waiting (it has retried after a failed attempt), on any machine.
	before := metric(t, waiter, "redlock_acquire_retries_total")
	got := make(chan error, 1)
	var l *redlock.Lock
	go func() {
		var err error
		l, err = waiter.Acquire(res, 5*time.Second, redlock.NoWait(), redlock.Wait(time.Minute), redlock.Fenced())
		got <- err
	}()
	if !eventually(30*time.Second, func() bool { return metric(t, waiter, "redlock_acquire_retries_total") > before }) {
		t.Fatal("the waiter never retried")
	}
	select {
	case err := <-got:
		t.Fatalf("the waiter returned while the lock was held: %v", err)
	default:
	}
	wantNoErr(t, "Unlock by the holder", held.Unlock())
	select {
	case err := <-got:
		wantNoErr(t, "Acquire(Wait(1m)) after the release", err)
	case <-time.After(50 * time.Second):
		t.Fatal("the waiter did not get the lock within 50 s of the release")
	}
	defer l.Free()
	if n := holding(t, sharedNodes, res, l.Value()); n < 2 {
		t.Fatalf("%d nodes hold the waiter's token", n)
	}
	if l.FencingToken() == 0 {
		t.Fatal("Fenced was lost among the wait options")
	}
	wantNoErr(t, "Unlock by the waiter", l.Unlock())
}

// metric reads one unlabelled sample, or one with its labels written out in name (for
// example `redlock_acquire_total{result="granted"}`), from m's metrics; 0 when absent.
func metric(t testing.TB, m *redlock.Manager, name string) int {
	t.Helper()
	text, err := m.Metrics()
	wantNoErr(t, "Metrics", err)
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, name+" ") {
			var n float64
			if _, err := fmt.Sscan(strings.TrimPrefix(line, name+" "), &n); err != nil {
				t.Fatalf("metrics line %q: %v", line, err)
			}
			return int(n)
		}
	}
	return 0
}

// Fenced tokens increase from grant to grant, whichever method and wait option took them,
// and from manager to manager.
func TestAcquireFencedTokensIncrease(t *testing.T) {
	t.Parallel()
	m1 := newManager(t, sharedNodes)
	m2 := newManager(t, sharedNodes)
	res := uniq(t)
	acquirers := []func() (*redlock.Lock, error){
		func() (*redlock.Lock, error) { return m1.Acquire(res, time.Second, redlock.Fenced()) },
		func() (*redlock.Lock, error) { return m2.Acquire(res, time.Second, redlock.Fenced(), redlock.NoWait()) },
		func() (*redlock.Lock, error) {
			return m1.Acquire(res, time.Second, redlock.Wait(5*time.Second), redlock.Fenced())
		},
		func() (*redlock.Lock, error) { return m2.Lock(res, time.Second, redlock.Fenced()) },
		func() (*redlock.Lock, error) { return m1.TryLock(res, time.Second, redlock.Fenced()) },
		func() (*redlock.Lock, error) { return m2.LockWait(res, time.Second, 5*time.Second, redlock.Fenced()) },
		func() (*redlock.Lock, error) {
			return m1.Acquire(res, time.Second, redlock.Fenced(), redlock.AutoRenew(time.Minute))
		},
	}
	var last uint64
	for round := 0; round < 2; round++ {
		for i, acquire := range acquirers {
			l, err := acquire()
			wantNoErr(t, fmt.Sprintf("round %d, acquisition %d", round, i), err)
			tok := l.FencingToken()
			if tok <= last {
				t.Fatalf("round %d, acquisition %d: token %d does not exceed %d", round, i, tok, last)
			}
			last = tok
			wantNoErr(t, "Unlock", l.Unlock())
			l.Free()
		}
	}
}

// The AutoRenew option through Acquire, without OnLost: a 1 s lock stays held past 3 s,
// nobody else gets it, and then the maximum hold ends it with the Lost channel closed and
// the reason given, exactly as through Lock.
func TestAcquireAutoRenewHoldsPastTTL(t *testing.T) {
	t.Parallel()
	const maxHold = 3500 * time.Millisecond
	m := newManager(t, sharedNodes)
	other := newManager(t, sharedNodes, redlock.WithRetry(0, 0))
	res := uniq(t)
	start := time.Now()
	l, err := m.Acquire(res, time.Second, redlock.NoWait(), redlock.AutoRenew(maxHold))
	wantNoErr(t, "Acquire(NoWait, AutoRenew)", err)
	defer l.Free()
	if !l.Renewing() || l.IsLost() || l.LostReason() != "" {
		t.Fatalf("Renewing %v, IsLost %v, LostReason %q", l.Renewing(), l.IsLost(), l.LostReason())
	}
	for time.Since(start) < 3100*time.Millisecond {
		if !l.Valid() || !l.Renewing() || l.IsLost() {
			t.Fatalf("at %v: Valid %v, Renewing %v, IsLost %v (%s)",
				time.Since(start), l.Valid(), l.Renewing(), l.IsLost(), l.LostReason())
		}
		if o, err := other.Acquire(res, time.Second, redlock.NoWait()); err == nil {
			o.Free()
			t.Fatal("another manager acquired an auto-renewed lock")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := holding(t, sharedNodes, res, l.Value()); n < 2 {
		t.Fatalf("after 3.1 s of a 1 s lock only %d nodes hold the token", n)
	}
	select {
	case <-l.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("Lost() not closed within 10 s of the maximum hold time")
	}
	if at := time.Since(start); at < maxHold-50*time.Millisecond {
		t.Fatalf("lost after %v, before the maximum hold of %v", at, maxHold)
	}
	if r := l.LostReason(); !strings.Contains(r, "maximum hold time") {
		t.Fatalf("LostReason() = %q", r)
	}
	if l.Renewing() || !l.IsLost() || l.Valid() || !l.WaitLost(time.Second) {
		t.Fatalf("after the loss: Renewing %v, IsLost %v, Valid %v", l.Renewing(), l.IsLost(), l.Valid())
	}
	_ = l.Unlock()
}

// Bad options are ErrInvalidArgument before anything is sent, through Acquire and through the
// older methods; TryLock and LockWait refuse Wait and NoWait, whose wait they fix themselves.
func TestAcquireBadOptions(t *testing.T) {
	t.Parallel()
	m := newManager(t, sharedNodes)
	res := uniq(t)
	bad := map[string][]redlock.LockOption{
		"Wait(-1ns)":                {redlock.Wait(-time.Nanosecond)},
		"Wait(-1s) then Wait(1s)":   {redlock.Wait(-time.Second), redlock.Wait(time.Second)},
		"Wait(MaxTTL+1ms)":          {redlock.Fenced(), redlock.Wait(redlock.MaxTTL + time.Millisecond)},
		"AutoRenew(-1ms)":           {redlock.NoWait(), redlock.AutoRenew(-time.Millisecond)},
		"OnLost without AutoRenew":  {redlock.Wait(time.Second), redlock.OnLost(func(*redlock.Lock) {})},
		"MaxExtensions without one": {redlock.NoWait(), redlock.MaxExtensions(3)},
	}
	for name, opts := range bad {
		for method, acquire := range map[string]func(...redlock.LockOption) (*redlock.Lock, error){
			"Acquire": func(o ...redlock.LockOption) (*redlock.Lock, error) { return m.Acquire(res, time.Second, o...) },
			"Lock":    func(o ...redlock.LockOption) (*redlock.Lock, error) { return m.Lock(res, time.Second, o...) },
		} {
			l, err := acquire(opts...)
			if l != nil {
				t.Fatalf("%s(%s) returned a lock", method, name)
			}
			wantIs(t, method+"("+name+")", err, redlock.ErrInvalidArgument)
		}
	}
	for name, opt := range map[string]redlock.LockOption{
		"NoWait": redlock.NoWait(), "Wait(1s)": redlock.Wait(time.Second), "Wait(0)": redlock.Wait(0),
	} {
		l, err := m.TryLock(res, time.Second, redlock.Fenced(), opt)
		if l != nil {
			t.Fatalf("TryLock(%s) returned a lock", name)
		}
		wantIs(t, "TryLock("+name+")", err, redlock.ErrInvalidArgument)
		if !strings.Contains(err.Error(), "TryLock does not take the Wait or NoWait option") {
			t.Fatalf("TryLock(%s): message %q", name, err)
		}
		l, err = m.LockWait(res, time.Second, time.Second, opt)
		if l != nil {
			t.Fatalf("LockWait(%s) returned a lock", name)
		}
		wantIs(t, "LockWait("+name+")", err, redlock.ErrInvalidArgument)
	}
	// Bad TTLs and resources with valid wait options.
	for _, ttl := range []time.Duration{0, -time.Second, 2 * time.Millisecond, redlock.DefaultMaxTTL + time.Millisecond} {
		_, err := m.Acquire(res, ttl, redlock.Wait(time.Second))
		wantIs(t, fmt.Sprintf("Acquire(ttl %v)", ttl), err, redlock.ErrInvalidArgument)
	}
	for _, r := range []string{"", strings.Repeat("r", redlock.MaxResourceLen+1)} {
		_, err := m.Acquire(r, time.Second, redlock.NoWait(), redlock.Fenced())
		wantIs(t, fmt.Sprintf("Acquire(%d-byte resource)", len(r)), err, redlock.ErrInvalidArgument)
	}
	if n := present(t, sharedNodes, res); n != 0 {
		t.Fatalf("bad options reached the nodes (the key is on %d)", n)
	}
	if a := metric(t, m, "redlock_acquire_attempts_total"); a != 0 {
		t.Fatalf("invalid calls made %d attempts", a)
	}

	// Valid edge cases: the largest wait is accepted (and, the lock being free, granted at
	// once); Wait and NoWait after a bad Wait do not hide its error (checked above).
	l, err := m.Acquire(res, time.Second, redlock.Wait(redlock.MaxTTL))
	wantNoErr(t, "Acquire(Wait(MaxTTL))", err)
	wantNoErr(t, "Unlock", l.Unlock())
	l.Free()

	// Closed and nil managers.
	var nilM *redlock.Manager
	_, err = nilM.Acquire(res, time.Second, redlock.NoWait())
	wantIs(t, "nil Manager Acquire", err, redlock.ErrNullArgument)
	closed := newManager(t, sharedNodes)
	closed.Close()
	for name, opts := range map[string][]redlock.LockOption{
		"none": nil, "NoWait": {redlock.NoWait()}, "Wait": {redlock.Wait(time.Second)}, "Fenced": {redlock.Fenced()},
	} {
		_, err = closed.Acquire(res, time.Second, opts...)
		if err != redlock.ErrClosed {
			t.Fatalf("Acquire(%s) on a closed manager: %v, want ErrClosed", name, err)
		}
	}
}

// Many goroutines share a manager's cached options (the same option sets, and many Wait
// durations, more than the manager keeps), while Close runs in the middle: every call either
// succeeds, is not acquired, or finds the manager closed. Run under -race.
func TestAcquireConcurrentSharedOptions(t *testing.T) {
	t.Parallel()
	m, err := redlock.New(sharedNodes, testTimeouts, redlock.WithRetry(1, 5*time.Millisecond))
	wantNoErr(t, "New", err)
	defer m.Close()
	res := uniq(t)
	optionSets := [][]redlock.LockOption{
		nil,
		{redlock.NoWait()},
		{redlock.Fenced()},
		{redlock.NoWait(), redlock.Fenced()},
		{redlock.Wait(50 * time.Millisecond)},
		{redlock.Wait(50 * time.Millisecond), redlock.Fenced()},
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	fail := func(format string, args ...any) {
		mu.Lock()
		failures = append(failures, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	closeAt := make(chan struct{})
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				if i == 20 && g == 0 {
					close(closeAt)
				}
				opts := optionSets[(g+i)%len(optionSets)]
				if i%5 == 4 { // a wait of its own: more durations than the manager keeps
					opts = []redlock.LockOption{redlock.Wait(time.Duration(10+g*40+i) * time.Millisecond)}
				}
				l, err := m.Acquire(fmt.Sprintf("%s/%d", res, g), time.Second, opts...)
				switch {
				case err == nil:
					if err := l.Unlock(); err != nil {
						fail("goroutine %d: Unlock: %v", g, err)
					}
					l.Free()
				case err == redlock.ErrClosed:
				default:
					fail("goroutine %d, call %d: %v", g, i, err)
				}
			}
		}(g)
	}
	<-closeAt
	m.Close()
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d failures, first: %s", len(failures), failures[0])
	}
}
