package redlock

// #include "redlock.h"
import "C"

import (
	"errors"
	"fmt"
)

// Status is the result code of a library call. The numbers are those of the C ABI's
// redlock_status and never change.
type Status int32

// The statuses of the C ABI.
const (
	// StatusOK is success; it never appears in an *Error.
	StatusOK Status = C.REDLOCK_STATUS_OK
	// StatusNotAcquired: the lock is held elsewhere (for a semaphore: every permit is), or the
	// grants came too late to leave any validity. Retrying later may succeed.
	StatusNotAcquired Status = C.REDLOCK_STATUS_NOT_ACQUIRED
	// StatusNotHeld: Unlock or Extend could not confirm ownership on a quorum: the lock
	// expired, was already unlocked, or was taken over.
	StatusNotHeld Status = C.REDLOCK_STATUS_NOT_HELD
	// StatusUnavailable: too many nodes failed (timeouts, refused connections, errors) or are
	// in restart quarantine for a quorum to be possible.
	StatusUnavailable Status = C.REDLOCK_STATUS_UNAVAILABLE
	// StatusAuth: like StatusUnavailable, but the nodes that refused this client's
	// credentials (a wrong password or user, a password missing, an ACL user without the
	// needed permissions: WRONGPASS, NOAUTH, NOPERM) are what stands between the others and a
	// quorum. Fix the node URLs or the ACLs.
	StatusAuth Status = C.REDLOCK_STATUS_AUTH
	// StatusCancelled: the acquisition was cancelled (Manager.LockContext, LockManyContext,
	// Semaphore.AcquireContext: its context was cancelled) and left no key behind on any node.
	StatusCancelled Status = C.REDLOCK_STATUS_CANCELLED
	// StatusInvalidArgument: bad input (a malformed URL, a TTL out of range, an empty
	// resource, …). Nothing was sent to any node.
	StatusInvalidArgument Status = C.REDLOCK_STATUS_INVALID_ARGUMENT
	// StatusNullArgument: a required pointer was NULL; in Go, a method was called on a nil
	// *Manager or *Lock.
	StatusNullArgument Status = C.REDLOCK_STATUS_NULL_ARGUMENT
	// StatusInvalidHandle: the library was given a handle that is not a live handle of its
	// type (freed already, or never one). This package never passes one (calls on a closed
	// Manager or a freed Lock return ErrClosed first), so it means a bug; the library's check
	// is best effort, not a guarantee.
	StatusInvalidHandle Status = C.REDLOCK_STATUS_INVALID_HANDLE
	// StatusInternal: an operating-system facility failed (random source, poll(2)).
	StatusInternal Status = C.REDLOCK_STATUS_INTERNAL
	// StatusPanic: a bug; the library panicked. The panic was caught and the process is intact.
	StatusPanic Status = C.REDLOCK_STATUS_PANIC
)

// String returns the library's description of the status ("ok", "not acquired", …, or
// "unknown status").
func (s Status) String() string {
	return C.GoString(C.redlock_status_str(C.int32_t(s)))
}

// Error is a failure reported by the library (or detected by this package before calling it):
// the status and the message, which starts with the category ("not acquired: ",
// "invalid input: ", …) and for lock, unlock and extend names each node's outcome.
//
// Match it with errors.Is against the sentinels (ErrNotAcquired, ErrNotHeld, …): an *Error
// matches any *Error target with the same Status, whatever the messages. Use errors.As to
// read the Status and Message.
//
// An error of Manager.LockContext (or LockManyContext, Semaphore.AcquireContext) that its
// context ended also wraps the context's error (Unwrap): errors.Is(err, context.Canceled) or
// errors.Is(err, context.DeadlineExceeded) holds, and so does errors.Is(err, cause) for a
// cause given to context.WithCancelCause.
type Error struct {
	Status  Status
	Message string

	// cause is the context's error when a context ended the call (see Unwrap), else nil.
	cause error
}

// Unwrap returns the error of the context that ended a Manager.LockContext (LockManyContext,
// Semaphore.AcquireContext) call (context.Canceled or context.DeadlineExceeded, joined with
// the context's cause when it has another one), or nil.
func (e *Error) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.cause
}

// Error returns "redlock: " followed by the message, or by the status when there is no
// message. The library's messages start with their category, for example
// "redlock: not acquired: 1/3 granted (quorum 2); node 0 (…): held by another owner; …".
func (e *Error) Error() string {
	if e.Message == "" {
		return "redlock: " + e.Status.String()
	}
	return "redlock: " + e.Message
}

// Is reports whether target is an *Error with the same Status, so that
// errors.Is(err, ErrNotHeld) holds for every "not held" error. An error with StatusAuth also
// matches ErrUnavailable: a quorum was out of reach, and ErrAuth says why, so code that
// handles ErrUnavailable handles it too.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok || t == nil || e == nil {
		return false
	}
	return t.Status == e.Status || (e.Status == StatusAuth && t.Status == StatusUnavailable)
}

// Sentinel errors, one per status, for errors.Is. They carry no message; the errors returned
// by this package do.
var (
	// ErrNotAcquired: Acquire (or Lock, TryLock, LockWait) found the lock held elsewhere, or a
	// Semaphore's methods found every permit held.
	ErrNotAcquired error = &Error{Status: StatusNotAcquired}
	// ErrNotHeld: Unlock or Extend found the lock no longer ours (expired, already unlocked,
	// taken over).
	ErrNotHeld error = &Error{Status: StatusNotHeld}
	// ErrUnavailable: too many nodes failed for a quorum to be possible.
	ErrUnavailable error = &Error{Status: StatusUnavailable}
	// ErrAuth: nodes refused the credentials, and without them a quorum was impossible (an
	// ErrAuth error also matches ErrUnavailable).
	ErrAuth error = &Error{Status: StatusAuth}
	// ErrCancelled: Manager.LockContext (or LockManyContext, Semaphore.AcquireContext) was
	// cancelled through its context; no key was left behind. The error also matches the
	// context's error (context.Canceled). A context whose deadline passes gives ErrNotAcquired
	// (with context.DeadlineExceeded) instead.
	ErrCancelled error = &Error{Status: StatusCancelled}
	// ErrInvalidArgument: bad input; nothing was sent.
	ErrInvalidArgument error = &Error{Status: StatusInvalidArgument}
	// ErrNullArgument: a method was called on a nil *Manager or *Lock.
	ErrNullArgument error = &Error{Status: StatusNullArgument}
	// ErrInvalidHandle: the library was given a freed or forged handle (a bug; best effort).
	ErrInvalidHandle error = &Error{Status: StatusInvalidHandle}
	// ErrInternal: an operating-system facility failed inside the library.
	ErrInternal error = &Error{Status: StatusInternal}
	// ErrPanic: the library panicked (a bug); the panic was caught.
	ErrPanic error = &Error{Status: StatusPanic}
)

// ErrClosed is returned by calls on a Manager after Close, and by Unlock and Extend on a Lock
// after Free. It is not an *Error: it has no library status.
var ErrClosed = errors.New("redlock: use of a closed Manager or a freed Lock")

// invalidf returns an *Error with StatusInvalidArgument, for input rejected in Go before any
// C call.
func invalidf(format string, args ...any) error {
	return &Error{Status: StatusInvalidArgument, Message: "invalid input: " + fmt.Sprintf(format, args...)}
}

// nilReceiver is the error of a call on a nil *Manager or *Lock.
func nilReceiver(what string) error {
	return &Error{Status: StatusNullArgument, Message: "null argument: nil " + what}
}
