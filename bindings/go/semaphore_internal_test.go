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

// A Semaphore's acquisitions use the manager's options as a lock's do: the common sets
// (NoWait, Fenced, the retry policy) and a Wait duration cost nothing per call once made,
// AcquireContext makes and frees options and a cancel handle of its own, and a refused call
// makes nothing. Past the Go checks, the library refuses WithShared, WithOwner and WithFair
// itself: its INVALID_ARGUMENT reaches the caller as ErrInvalidArgument with the library's
// message, and nothing is held. Counted per manager, so it runs in parallel with anything.
func TestSemaphoreOptionsAndLibraryRefusal(t *testing.T) {
	t.Parallel()
	nodes := strings.Split(os.Getenv("REDLOCK_NODES"), ",")
	m, err := New(nodes, WithTimeouts(time.Second, 500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	live := func() int { return int(m.optsLive.Load()) }
	name := fmt.Sprintf("TestSemaphoreOptionsAndLibraryRefusal/%d", time.Now().UnixNano())
	sem, err := m.Semaphore(name, 2)
	if err != nil {
		t.Fatal(err)
	}
	cycle := func(what string, acquire func() (*Lock, error)) {
		t.Helper()
		l, err := acquire()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if _, permits, ok := l.Permit(); !ok || permits != 2 {
			t.Fatalf("%s: Permit() = %v, %v", what, permits, ok)
		}
		if err := l.Unlock(); err != nil {
			t.Fatalf("%s: Unlock: %v", what, err)
		}
		l.Free()
	}

	for i := 0; i < 3; i++ {
		cycle("Acquire", func() (*Lock, error) { return sem.Acquire(time.Second) })
		cycle("Acquire(NoWait, Fenced)", func() (*Lock, error) { return sem.Acquire(time.Second, NoWait(), Fenced()) })
		cycle("TryAcquire", func() (*Lock, error) { return sem.TryAcquire(time.Second) })
		cycle("TryAcquire(Fenced)", func() (*Lock, error) { return sem.TryAcquire(time.Second, Fenced()) })
	}
	if got := live(); got != len(m.fixedOpts) {
		t.Fatalf("after the common sets the manager holds %d options, want %d", got, len(m.fixedOpts))
	}
	for i := 0; i < 3; i++ {
		cycle("AcquireWait(2s)", func() (*Lock, error) { return sem.AcquireWait(time.Second, 2*time.Second) })
		cycle("Acquire(Wait(2s))", func() (*Lock, error) { return sem.Acquire(time.Second, Wait(2*time.Second)) })
	}
	if got, want := live(), len(m.fixedOpts)+1; got != want {
		t.Fatalf("after one Wait duration the manager holds %d options, want %d", got, want)
	}
	for i := 0; i < 3; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cycle("AcquireContext(deadline, Fenced)", func() (*Lock, error) { return sem.AcquireContext(ctx, time.Second, Fenced()) })
		cancel()
		cycle("AcquireContext", func() (*Lock, error) { return sem.AcquireContext(context.Background(), time.Second) })
	}
	if got, want := live(), len(m.fixedOpts)+1; got != want {
		t.Fatalf("after AcquireContext the manager holds %d options, want %d", got, want)
	}
	m.cancelMu.Lock()
	if len(m.cancels) != 0 {
		t.Fatalf("%d cancel handles registered after AcquireContext returned", len(m.cancels))
	}
	m.cancelMu.Unlock()

	// Refused by the library: the owner's options are the call's own and freed; the shared
	// wait's are kept by the manager, as any wait duration's.
	for what, opt := range map[string]LockOption{"WithShared": WithShared(), "WithOwner": WithOwner("o")} {
		if _, err := sem.AcquireWait(time.Second, 7*time.Second, opt); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("AcquireWait with %s: %v", what, err)
		}
	}
	if got, want := live(), len(m.fixedOpts)+2; got != want {
		t.Fatalf("after refused calls the manager holds %d options, want %d", got, want)
	}

	// The library's own refusal, past the Go checks, for each way the options reach it (the
	// manager's shared sets, options made for a wait, and a context's own options).
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
	before := attempts()
	for _, c := range []struct {
		what string
		ctx  context.Context
		o    lockOptions
	}{
		{"shared", nil, lockOptions{shared: true}},
		{"shared, NoWait, Fenced", nil, lockOptions{shared: true, wait: waitNone, fenced: true}},
		{"shared, Wait(3s)", nil, lockOptions{shared: true, wait: waitFor, waitMs: 3000}},
		{"owner", nil, lockOptions{owner: "o", ownerSet: true, wait: waitNone}},
		{"owner, context", context.Background(), lockOptions{owner: "o", ownerSet: true, wait: waitFor, waitMs: 3000}},
		{"shared, context", context.Background(), lockOptions{shared: true, wait: waitFor, waitMs: 3000}},
		{"fair", nil, lockOptions{fair: true, wait: waitNone}},
		{"fair, drop-out, context", context.Background(), lockOptions{fair: true, dropOutMs: 1000, wait: waitFor, waitMs: 3000}},
	} {
		l, err := m.acquirePermitLease(c.ctx, name, 2, 1000, &c.o)
		var e *Error
		if l != nil || !errors.As(err, &e) || e.Status != StatusInvalidArgument {
			t.Fatalf("%s: the library's refusal: %v, %#v", c.what, l, err)
		}
		if !strings.Contains(e.Message, "neither reentrant, shared nor fair") {
			t.Fatalf("%s: message %q", c.what, e.Message)
		}
	}
	if after := attempts(); after != before || before == "" {
		t.Fatalf("attempts for options the library refused: %q, then %q", before, after)
	}
	// Options made for the one call (owner, fair, context) are freed; the shared-and-wait sets
	// (3 s here, 7 s above) are kept.
	if got, want := live(), len(m.fixedOpts)+3; got != want {
		t.Fatalf("after the library's refusals the manager holds %d options, want %d", got, want)
	}
}
