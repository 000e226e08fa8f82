package redlock_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	redlock "github.com/redlock-quorum/redlock/bindings/go"
)

// A plain lock: no fencing token, no renewal, no loss; TTL follows Extend.
func TestPlainLockAccessors(t *testing.T) {
	t.Parallel()
	m := newManager(t, sharedNodes)
	l, err := m.Lock(uniq(t), 2*time.Second)
	wantNoErr(t, "Lock", err)
	defer l.Free()
	if l.FencingToken() != 0 {
		t.Fatalf("a plain lock has fencing token %d, want 0", l.FencingToken())
	}
	if l.Renewing() || l.IsLost() || l.LostReason() != "" {
		t.Fatalf("a plain lock: Renewing %v, IsLost %v, LostReason %q", l.Renewing(), l.IsLost(), l.LostReason())
	}
	if l.TTL() != 2*time.Second {
		t.Fatalf("TTL() = %v, want 2s", l.TTL())
	}
	wantNoErr(t, "Extend", l.Extend(1500*time.Millisecond))
	if l.TTL() != 1500*time.Millisecond {
		t.Fatalf("TTL() after Extend(1.5s) = %v", l.TTL())
	}
	// WaitLost returns at once when renewal is off, as redlock_lease_wait_lost does.
	start := time.Now()
	if l.WaitLost(5 * time.Second) {
		t.Fatal("WaitLost reported a plain lock lost")
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("WaitLost without renewal waited %v", d)
	}
	wantNoErr(t, "Unlock", l.Unlock())
	l.Free()
	if l.TTL() != 1500*time.Millisecond || l.FencingToken() != 0 || l.Renewing() || l.LostReason() != "" {
		t.Fatal("accessors after Free")
	}
	var nilL *redlock.Lock
	if nilL.FencingToken() != 0 || nilL.TTL() != 0 || nilL.Renewing() || nilL.LostReason() != "" {
		t.Fatal("nil Lock accessors")
	}
}

// AutoRenew as a Lock option: a 1 s lock stays alive past several TTLs, and is reported lost
// at about the maximum hold time, with the reason, the Lost channel and the OnLost callback.
func TestAutoRenewOption(t *testing.T) {
	t.Parallel()
	const maxHold = 2500 * time.Millisecond
	m := newManager(t, sharedNodes)
	other := newManager(t, sharedNodes, redlock.WithRetry(0, 0))
	res := uniq(t)
	lostWith := make(chan *redlock.Lock, 2)
	start := time.Now()
	l, err := m.Lock(res, time.Second, redlock.AutoRenew(maxHold),
		redlock.OnLost(func(l *redlock.Lock) { lostWith <- l }))
	wantNoErr(t, "Lock with AutoRenew", err)
	defer l.Free()
	if !l.Renewing() || l.TTL() != time.Second || l.FencingToken() != 0 {
		t.Fatalf("Renewing %v, TTL %v, FencingToken %d", l.Renewing(), l.TTL(), l.FencingToken())
	}

	// Held past two TTLs, checked on the nodes and against another manager.
	for time.Since(start) < 2100*time.Millisecond {
		if !l.Valid() || !l.Renewing() || l.IsLost() {
			t.Fatalf("at %v: Valid %v, Renewing %v, IsLost %v (%s)",
				time.Since(start), l.Valid(), l.Renewing(), l.IsLost(), l.LostReason())
		}
		if _, err := other.TryLock(res, time.Second); err == nil {
			t.Fatal("another manager acquired an auto-renewed lock")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := holding(t, sharedNodes, res, l.Value()); n < 2 {
		t.Fatalf("after 2.1 s of a 1 s lock only %d nodes hold the token", n)
	}
	if l.TTL() != time.Second {
		t.Fatalf("TTL() after renewals = %v, want 1s", l.TTL())
	}

	select {
	case <-l.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("Lost() not closed within 5 s of the maximum hold time")
	}
	at := time.Since(start)
	// At the bound (counted from the acquisition, after start), not at some renewal after it
	// (every third of a second) nor never (the select above); the slack above is for a busy
	// machine's scheduling.
	if at < maxHold-50*time.Millisecond || at > maxHold+2*time.Second {
		t.Fatalf("lost after %v, want about %v", at, maxHold)
	}
	select {
	case got := <-lostWith:
		if got != l {
			t.Fatal("OnLost received another Lock")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("OnLost not called")
	}
	reason := l.LostReason()
	if !strings.Contains(reason, "maximum hold time") {
		t.Fatalf("LostReason() = %q, want it to mention the maximum hold time", reason)
	}
	if l.Renewing() || !l.IsLost() || l.Valid() || !l.WaitLost(time.Second) {
		t.Fatalf("after the loss: Renewing %v, IsLost %v, Valid %v", l.Renewing(), l.IsLost(), l.Valid())
	}
	wantIs(t, "Extend after the loss", l.Extend(time.Second), redlock.ErrNotHeld)
	_ = l.Unlock() // the keys may remain until their TTL
	l.Free()
	if l.LostReason() != reason || !l.IsLost() || l.TTL() != time.Second {
		t.Fatalf("after Free: LostReason %q, IsLost %v, TTL %v", l.LostReason(), l.IsLost(), l.TTL())
	}
	if len(lostWith) != 0 {
		t.Fatal("OnLost called twice")
	}
}

// Fenced and AutoRenew compose: renewal keeps the token, MaxExtensions bounds it, and the next
// fenced grant of the resource gets a larger token.
func TestFencedAutoRenew(t *testing.T) {
	t.Parallel()
	m := newManager(t, sharedNodes)
	res := uniq(t)
	var calls atomic.Int32
	// 1 s: a 600 ms TTL can be lost to a renewal that a busy machine delays (for another
	// reason than the bound checked below).
	l, err := m.TryLock(res, time.Second, redlock.Fenced(), redlock.AutoRenew(0),
		redlock.MaxExtensions(3), redlock.OnLost(func(*redlock.Lock) { calls.Add(1) }))
	wantNoErr(t, "TryLock(Fenced, AutoRenew, MaxExtensions)", err)
	defer l.Free()
	token := l.FencingToken()
	if token == 0 || !l.Renewing() {
		t.Fatalf("FencingToken %d, Renewing %v", token, l.Renewing())
	}
	if !strings.Contains(l.String(), "fencing token") {
		t.Fatalf("String() = %q", l.String())
	}
	time.Sleep(1100 * time.Millisecond) // past the first TTL
	if !l.Valid() || l.FencingToken() != token {
		t.Fatalf("after a renewal: Valid %v, token %d (was %d)", l.Valid(), l.FencingToken(), token)
	}
	if !l.WaitLost(5 * time.Second) {
		t.Fatal("not lost after 3 extensions")
	}
	if r := l.LostReason(); !strings.Contains(r, "3 extensions") {
		t.Fatalf("LostReason() = %q", r)
	}
	if !eventually(settle, func() bool { return calls.Load() == 1 }) {
		t.Fatalf("OnLost called %d times", calls.Load())
	}
	_ = l.Unlock()

	next, err := m.LockWait(res, time.Second, 3*time.Second, redlock.Fenced())
	wantNoErr(t, "the next fenced grant", err)
	defer next.Free()
	if next.FencingToken() <= token {
		t.Fatalf("the next grant's token %d does not exceed %d", next.FencingToken(), token)
	}
	wantNoErr(t, "Unlock", next.Unlock())
}

// WaitLost returns false as soon as renewal stops: StopRenewal and Unlock wake a waiter.
func TestWaitLostEndsWhenRenewalStops(t *testing.T) {
	t.Parallel()
	m := newManager(t, sharedNodes)
	res := uniq(t)
	for _, stop := range []string{"StopRenewal", "Unlock", "Free"} {
		l, err := m.Lock(res+"/"+stop, time.Second, redlock.AutoRenew(time.Minute))
		wantNoErr(t, stop+": Lock", err)
		result := make(chan bool, 1)
		go func() { result <- l.WaitLost(30 * time.Second) }()
		time.Sleep(100 * time.Millisecond)
		start := time.Now()
		switch stop {
		case "StopRenewal":
			l.StopRenewal()
			if l.Renewing() {
				t.Fatal("Renewing() after StopRenewal")
			}
			// Renewal can be started again, and stopped again.
			wantNoErr(t, "AutoRenew after StopRenewal", l.AutoRenew(time.Minute, 0, nil))
			if !l.Renewing() {
				t.Fatal("not Renewing() after AutoRenew")
			}
			l.StopRenewal()
		case "Unlock":
			wantNoErr(t, "Unlock", l.Unlock())
		case "Free":
			l.Free()
		}
		select {
		case lost := <-result:
			if lost {
				t.Fatalf("%s: WaitLost reported a loss", stop)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: WaitLost still waiting 5 s after renewal stopped", stop)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("%s: WaitLost returned %v after renewal stopped", stop, d)
		}
		_ = l.Unlock()
		l.Free()
	}
}

// The rules of New's options that the library checks reach the caller with the library's own
// message, unchanged: Go checks only what C could not receive (a NUL byte) and what does not
// fit the C ABI (a negative or too long duration). Nothing is sent: no node listens.
func TestNewOptionsLibraryMessages(t *testing.T) {
	t.Parallel()
	nodes := []string{"redis://127.0.0.1:1"}
	for _, c := range []struct {
		name string
		opt  redlock.Option
		want string // the library's message
	}{
		{"WithKeyPrefix(257 bytes)", redlock.WithKeyPrefix(strings.Repeat("p", redlock.MaxKeyPrefixLen+1)),
			"key prefix is 257 bytes; the limit is 256"},
		{"WithLabel(257 bytes)", redlock.WithLabel(strings.Repeat("x", redlock.MaxLabelLen+1)),
			"label is 257 bytes; the limit is 256"},
		{"WithLabel(newline)", redlock.WithLabel("a\nb"), "label must not contain control characters"},
		{"WithLabel(bad UTF-8)", redlock.WithLabel("bad \xff"), "label is not valid UTF-8"},
		{"WithMaxTTL(0)", redlock.WithMaxTTL(0), "maximum TTL must be at least 3 ms"},
		{"WithMaxTTL(2ms)", redlock.WithMaxTTL(2 * time.Millisecond), "maximum TTL must be at least 3 ms"},
		{"WithTimeouts(0, 0)", redlock.WithTimeouts(0, 0), "connect timeout must be > 0 ms"},
	} {
		m, err := redlock.New(nodes, c.opt)
		if err == nil {
			m.Close()
			t.Fatalf("New with %s: no error", c.name)
		}
		wantIs(t, "New with "+c.name, err, redlock.ErrInvalidArgument)
		if !strings.Contains(err.Error(), c.want) {
			t.Fatalf("New with %s: %q, want the library's message %q", c.name, err, c.want)
		}
		t.Logf("New with %s: %v", c.name, err)
	}
}
