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

// Past the Go checks (WithFair with WithOwner or WithShared, WithFair for several resources),
// the library refuses fair options itself: its INVALID_ARGUMENT reaches the caller as
// ErrInvalidArgument with the library's message, no attempt is made, and the options made for
// each call are freed. Counted per manager, so it runs in parallel with anything.
func TestFairLibraryRefusal(t *testing.T) {
	t.Parallel()
	nodes := strings.Split(os.Getenv("REDLOCK_NODES"), ",")
	m, err := New(nodes, WithTimeouts(time.Second, 500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	live := func() int { return int(m.optsLive.Load()) }
	attempts := func() string {
		text, err := m.Metrics()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(line, "redlock_acquire_attempts_total ") {
				return line
			}
		}
		return ""
	}
	res := fmt.Sprintf("TestFairLibraryRefusal/%d", time.Now().UnixNano())
	before := attempts()
	for _, c := range []struct {
		what string
		ctx  context.Context
		o    lockOptions
		says string
	}{
		{"fair, owner", nil, lockOptions{fair: true, owner: "o", ownerSet: true, wait: waitNone}, "a fair lock is neither reentrant nor shared"},
		{"fair, shared, Wait(3s)", nil, lockOptions{fair: true, shared: true, wait: waitFor, waitMs: 3000}, "a fair lock is neither reentrant nor shared"},
		{"fair, drop-out, shared, context", context.Background(), lockOptions{fair: true, dropOutMs: 1000, shared: true, wait: waitFor, waitMs: 3000}, "a fair lock is neither reentrant nor shared"},
	} {
		l, err := m.acquireLease(c.ctx, res, 1000, &c.o)
		var e *Error
		if l != nil || !errors.As(err, &e) || e.Status != StatusInvalidArgument {
			t.Fatalf("%s: the library's refusal: %v, %#v", c.what, l, err)
		}
		if !strings.Contains(e.Message, c.says) {
			t.Fatalf("%s: message %q", c.what, e.Message)
		}
	}
	o := lockOptions{fair: true, wait: waitNone}
	l, err := m.acquireManyLease(nil, []string{res + "/a", res + "/b"}, 1000, &o)
	var e *Error
	if l != nil || !errors.As(err, &e) || e.Status != StatusInvalidArgument || !strings.Contains(e.Message, "fair") {
		t.Fatalf("a fair set: the library's refusal: %v, %#v", l, err)
	}
	if after := attempts(); after != before || before == "" {
		t.Fatalf("attempts for options the library refused: %q, then %q", before, after)
	}
	if got := live(); got != len(m.fixedOpts) {
		t.Fatalf("after the library's refusals the manager holds %d options, want %d", got, len(m.fixedOpts))
	}
	// The same options without the conflict are granted, and the lease is fair.
	o = lockOptions{fair: true, dropOutMs: 1000, wait: waitNone}
	l, err = m.acquireLease(nil, res, 1000, &o)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Free()
	if _, ok := l.Ticket(); !l.IsFair() || ok {
		t.Fatalf("a fair lock granted at once: IsFair %v, a ticket %v", l.IsFair(), ok)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
}
