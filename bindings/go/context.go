package redlock

// #include <stdlib.h>
// #include "redlock.h"
import "C"

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"time"
)

// Context plumbing for LockContext, LockManyContext and Semaphore.AcquireContext: the wait
// a context implies, the cancel handle its end fires (as Close does), and the errors a call
// ended by a context returns.

// contextWait applies LockContext's context (nil for the other methods) to o: a context that
// has ended is an error, and nothing is sent; without a Wait or NoWait option, the wait lasts
// until the context's deadline.
func contextWait(ctx context.Context, o *lockOptions) error {
	if ctx == nil {
		return nil
	}
	if err := contextEnded(ctx, time.Now()); err != nil {
		return err
	}
	if !o.waitSet {
		o.wait, o.waitMs = waitFor, contextWaitMs(ctx, time.Now())
	}
	return nil
}

// acquireError is the error of a failed acquisition: the library's, or for LockContext (ctx
// non-nil) contextError's.
func acquireError(ctx context.Context, st C.enum_redlock_status, s cScratch) error {
	if ctx != nil {
		return contextError(ctx, Status(st), C.GoString(s.err), time.Now())
	}
	return statusError(st, s.err)
}

// acquireCallContext is acquireCall for LockContext (and LockManyContext): with options of
// its own that carry a cancel handle, fired when ctx ends (context.AfterFunc) or by Close.
// The caller holds m.mu's read lock, with m.ptr non-nil.
func (m *Manager) acquireCallContext(ctx context.Context, o *lockOptions, call acquireFunc) (out *C.redlock_lease, st C.enum_redlock_status, err error) {
	opts, err := m.newOwnedAcquireOpts(o)
	if err != nil {
		return nil, 0, err
	}
	defer m.freeAcquireOpts(opts)
	c := C.redlock_cancel_new()
	if c == nil {
		return nil, 0, newInternal("redlock_cancel_new: out of memory")
	}
	// Freed last, after the AfterFunc below is done with it (the options keep a reference of
	// their own).
	defer C.redlock_cancel_free(c)
	if st := C.redlock_acquire_opts_set_cancel(opts, c); st != C.REDLOCK_STATUS_OK { // only NULL_ARGUMENT
		return nil, 0, &Error{Status: Status(st), Message: "internal error: setting the cancel handle failed"}
	}

	// Registered for Close, unless Close has begun.
	if !m.addCancel(c) {
		return nil, 0, ErrClosed
	}
	defer m.removeCancel(c)

	// Fired in a goroutine of its own as soon as ctx ends (at once if it has ended already).
	// The handle is freed only once that function is stopped or has finished.
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		C.redlock_cancel_fire(c)
		close(fired)
	})
	defer func() {
		if !stop() { // it has started: wait until it no longer uses c
			<-fired
		}
	}()

	st = call(opts, &out)
	runtime.KeepAlive(m)
	if st == C.REDLOCK_STATUS_CANCELLED && ctx.Err() == nil {
		// Only Close fires the handle besides ctx.
		return nil, 0, ErrClosed
	}
	return out, st, nil
}

// addCancel registers c, the cancel handle of a call in progress, for Close to fire; false
// once Close has begun, which then fires no more handles.
func (m *Manager) addCancel(c *C.redlock_cancel) bool {
	m.cancelMu.Lock()
	defer m.cancelMu.Unlock()
	if m.closing {
		return false
	}
	if m.cancels == nil {
		m.cancels = make(map[*C.redlock_cancel]struct{})
	}
	m.cancels[c] = struct{}{}
	return true
}

// removeCancel unregisters c once its call has returned.
func (m *Manager) removeCancel(c *C.redlock_cancel) {
	m.cancelMu.Lock()
	delete(m.cancels, c)
	m.cancelMu.Unlock()
}

// fireCancels is Close's first step: it refuses new cancel handles and fires those of the
// calls in progress, so that no call waiting for a context holds Close up.
func (m *Manager) fireCancels() {
	m.cancelMu.Lock()
	defer m.cancelMu.Unlock()
	m.closing = true
	for c := range m.cancels {
		C.redlock_cancel_fire(c)
	}
}

// noDeadlineWait is LockContext's wait for a context without a deadline, when no Wait or
// NoWait option is given: the longest the C ABI can express, MaxTTL (about 49.7 days), which
// is as good as until the context is cancelled.
const noDeadlineWait = math.MaxUint32

// contextWaitMs is LockContext's wait for ctx when no Wait or NoWait option is given: until
// its deadline (rounded up to whole milliseconds; at most MaxTTL), or noDeadlineWait.
func contextWaitMs(ctx context.Context, now time.Time) uint32 {
	dl, ok := ctx.Deadline()
	if !ok {
		return noDeadlineWait
	}
	ms, ok := millis(dl.Sub(now))
	switch {
	case !ok && dl.After(now): // further away than MaxTTL
		return noDeadlineWait
	case !ok || ms == 0: // passed meanwhile: one attempt, which the deadline cancels
		return 1
	}
	return ms
}

// deadlinePassed reports whether ctx has a deadline that is not after now (ctx.Err() may not
// say so yet: its timer fires a moment later).
func deadlinePassed(ctx context.Context, now time.Time) bool {
	dl, ok := ctx.Deadline()
	return ok && !dl.After(now)
}

// contextCause is what an error ended by ctx wraps: ctx.Err(), and with it the context's
// cause when it has one of its own (context.WithCancelCause), so that errors.Is matches both.
// nil while ctx has not ended; context.DeadlineExceeded once its deadline has passed.
func contextCause(ctx context.Context, now time.Time) error {
	err := ctx.Err()
	if err == nil {
		if !deadlinePassed(ctx, now) {
			return nil
		}
		err = context.DeadlineExceeded
	}
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("%w: %w", err, cause)
	}
	return err
}

// contextEnded is LockContext's error for a context that ended before the first attempt, or
// nil: ErrCancelled for a cancelled context, ErrNotAcquired for one whose deadline has passed,
// each wrapping the context's error.
func contextEnded(ctx context.Context, now time.Time) error {
	cause := contextCause(ctx, now)
	switch {
	case cause == nil:
		return nil
	case errors.Is(cause, context.DeadlineExceeded):
		return &Error{Status: StatusNotAcquired, cause: cause,
			Message: "not acquired: the context's deadline passed before the first attempt (" + cause.Error() + ")"}
	}
	return &Error{Status: StatusCancelled, Message: "cancelled: " + cause.Error(), cause: cause}
}

// contextError is LockContext's error for a failed call with status st and the library's
// message msg. Once ctx has ended, the error wraps the context's error, and a cancellation
// that the deadline caused (by firing the handle) is ErrNotAcquired: a deadline ends a wait
// as Wait's time running out does. A cancellation by ctx stays ErrCancelled; a call that had
// failed on its own keeps its status.
func contextError(ctx context.Context, st Status, msg string, now time.Time) error {
	cause := contextCause(ctx, now)
	switch {
	case cause == nil:
		return &Error{Status: st, Message: msg}
	case st == StatusCancelled && errors.Is(cause, context.DeadlineExceeded):
		return &Error{Status: StatusNotAcquired, cause: cause,
			Message: "not acquired: the context's deadline passed while waiting (" + cause.Error() + ")"}
	case st == StatusCancelled:
		return &Error{Status: st, Message: "cancelled: " + cause.Error(), cause: cause}
	}
	return &Error{Status: st, Message: msg + " (" + cause.Error() + ")", cause: cause}
}
