package redlock

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"
)

// LockContext's wait for a context: until its deadline, rounded up to whole milliseconds and
// at most MaxTTL; without one, MaxTTL.
func TestContextWaitMs(t *testing.T) {
	now := time.Now()
	at := func(d time.Duration) context.Context {
		ctx, cancel := context.WithDeadline(context.Background(), now.Add(d))
		t.Cleanup(cancel)
		return ctx
	}
	for _, c := range []struct {
		ctx  context.Context
		want uint32
	}{
		{context.Background(), math.MaxUint32},
		{at(5 * time.Second), 5000},
		{at(1500 * time.Microsecond), 2},
		{at(time.Nanosecond), 1},
		{at(0), 1},
		{at(-time.Second), 1},
		{at(MaxTTL), math.MaxUint32},
		{at(2 * MaxTTL), math.MaxUint32},
	} {
		dl, _ := c.ctx.Deadline()
		if got := contextWaitMs(c.ctx, now); got != c.want {
			t.Errorf("contextWaitMs(deadline in %v) = %d, want %d", dl.Sub(now), got, c.want)
		}
	}
}

// How a failed LockContext's status and its context's state make its error.
func TestContextError(t *testing.T) {
	now := time.Now()
	live, cancelLive := context.WithCancel(context.Background())
	defer cancelLive()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), now.Add(-time.Millisecond))
	defer cancel2()
	// Its deadline has passed at now, although its timer has not fired yet.
	passing, cancel3 := context.WithDeadline(context.Background(), now.Add(time.Hour))
	defer cancel3()
	later := now.Add(2 * time.Hour)

	for _, c := range []struct {
		name    string
		ctx     context.Context
		at      time.Time
		st      Status
		wantSt  Status
		wantCtx error
		wantMsg string
	}{
		{"live, not acquired", live, now, StatusNotAcquired, StatusNotAcquired, nil, "not acquired: 1/3 granted"},
		{"cancelled by ctx", cancelled, now, StatusCancelled, StatusCancelled, context.Canceled, "cancelled: context canceled"},
		{"cancelled ctx, failed on its own", cancelled, now, StatusNotAcquired, StatusNotAcquired, context.Canceled,
			"not acquired: 1/3 granted (context canceled)"},
		{"deadline fired the handle", expired, now, StatusCancelled, StatusNotAcquired, context.DeadlineExceeded,
			"not acquired: the context's deadline passed while waiting (context deadline exceeded)"},
		{"the wait ended with the deadline", expired, now, StatusNotAcquired, StatusNotAcquired, context.DeadlineExceeded,
			"not acquired: 1/3 granted (context deadline exceeded)"},
		{"nodes failed until the deadline", expired, now, StatusUnavailable, StatusUnavailable, context.DeadlineExceeded,
			"unavailable: 1/3 granted (context deadline exceeded)"},
		{"deadline passed, timer not fired", passing, later, StatusNotAcquired, StatusNotAcquired, context.DeadlineExceeded,
			"not acquired: 1/3 granted (context deadline exceeded)"},
	} {
		msg := map[Status]string{StatusNotAcquired: "not acquired: 1/3 granted", StatusUnavailable: "unavailable: 1/3 granted",
			StatusCancelled: "cancelled"}[c.st]
		err := contextError(c.ctx, c.st, msg, c.at)
		var e *Error
		if !errors.As(err, &e) || e.Status != c.wantSt || e.Message != c.wantMsg {
			t.Errorf("%s: %#v, want status %v and message %q", c.name, err, c.wantSt, c.wantMsg)
			continue
		}
		if (c.wantCtx == nil) != (e.Unwrap() == nil) || (c.wantCtx != nil && !errors.Is(err, c.wantCtx)) {
			t.Errorf("%s: unwraps to %v, want %v", c.name, e.Unwrap(), c.wantCtx)
		}
		if errors.Is(err, ErrCancelled) != (c.wantSt == StatusCancelled) {
			t.Errorf("%s: errors.Is(err, ErrCancelled) = %v", c.name, errors.Is(err, ErrCancelled))
		}
	}

	if err := contextEnded(live, now); err != nil {
		t.Errorf("contextEnded(live) = %v", err)
	}
	if err := contextEnded(cancelled, now); !errors.Is(err, ErrCancelled) || !errors.Is(err, context.Canceled) {
		t.Errorf("contextEnded(cancelled) = %v", err)
	}
	for _, ctx := range []context.Context{expired, passing} {
		at := map[context.Context]time.Time{expired: now, passing: later}[ctx]
		if err := contextEnded(ctx, at); !errors.Is(err, ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) ||
			errors.Is(err, ErrCancelled) {
			t.Errorf("contextEnded(past its deadline) = %v", err)
		}
	}
}
