package redlock

// #include "redlock.h"
import "C"

import (
	"context"
	"fmt"
	"time"
)

// Semaphore is a counting semaphore over the quorum, made by Manager.Semaphore: at most
// Permits valid Locks of it exist at any instant, each one a permit, under the same
// assumptions as a lock. A holder that dies gives its permit back when its TTL runs out. It is
// a name and a count, nothing more: safe for concurrent use, and nothing to free.
//
// A permit is one of Permits slots, each held by a quorum of nodes exactly as a lock is (so the
// mutual exclusion of each slot bounds the count); Lock.Permit names the slot. An acquisition
// is one round trip when the nodes agree on which slots are free, and two when they picked
// different ones. The permit's Lock unlocks, extends, auto-renews and reports its validity as
// a lock does; with the Fenced option it carries a fencing token, strictly greater than that of
// every earlier holder of the same slot. A release wakes one waiter of the semaphore in each
// process that waits (by notification, as for a lock; see WithNotify).
//
// Every caller of one semaphore must name the same count: the count is recorded on each node
// with the holds, and a call naming another one while permits of the recorded count are held
// fails with ErrInvalidArgument, whose message names the recorded count ("this semaphore has
// 3 permits on 3 of 3 nodes, and this call named 4: …"); once no permit is held, a new count
// applies. A semaphore's keys ("redlock-sem:" followed by the lock key of its name, a Redis
// hash) never meet a lock's: a semaphore and a lock of the same name are independent.
type Semaphore struct {
	m       *Manager
	name    string
	permits uint32
}

// Semaphore returns the counting semaphore name with permits permits (see Semaphore). It
// checks its arguments and sends nothing: Semaphore.Acquire and its siblings take the permits.
// The name is 1 to MaxResourceLen arbitrary bytes, as a resource's; permits is 1 to
// MaxPermits. A name whose key would fall in the library's own namespaces (possible only with
// a key prefix set by WithKeyPrefix) is refused by the first acquisition instead. The
// Semaphore stays tied to m: after Close, its acquisitions return ErrClosed.
//
// Errors: ErrInvalidArgument for an empty or too long name, or a count out of range;
// ErrNullArgument for a nil Manager.
func (m *Manager) Semaphore(name string, permits uint32) (*Semaphore, error) {
	if m == nil {
		return nil, nilReceiver("*Manager")
	}
	switch {
	case permits == 0 || permits > MaxPermits:
		return nil, invalidf("a semaphore has 1 to %d permits, not %d", MaxPermits, permits)
	case name == "":
		return nil, invalidf("semaphore name must not be empty")
	}
	if err := checkResource(name); err != nil {
		return nil, err
	}
	return &Semaphore{m: m, name: name, permits: permits}, nil
}

// Name returns the semaphore's name, as given to Manager.Semaphore ("" for a nil Semaphore).
func (s *Semaphore) Name() string {
	if s == nil {
		return ""
	}
	return s.name
}

// Permits returns how many permits the semaphore has (0 for a nil Semaphore).
func (s *Semaphore) Permits() uint32 {
	if s == nil {
		return 0
	}
	return s.permits
}

// String describes the semaphore for logs: its name and its count.
func (s *Semaphore) String() string {
	if s == nil {
		return "redlock.Semaphore(nil)"
	}
	return fmt.Sprintf("redlock.Semaphore{name: %q, permits: %d}", s.name, s.permits)
}

// Acquire takes one permit of the semaphore for ttl, as Manager.Acquire takes a lock: by
// default retrying as configured by WithRetry while every permit is held; NoWait makes it a
// single attempt, and Wait(d) has it wait until d has passed, woken by a release (see
// WithNotify). The returned Lock is the permit (Lock.Permit names its slot): Unlock gives it
// back, and Extend, Validity, auto-renewal and FencingToken work on it as on a lock.
//
// The TTL follows the rules of Manager.Acquire. Options: NoWait, Wait, WithNotify, Fenced,
// AutoRenew, OnLost and MaxExtensions, as for Manager.Acquire; WithOwner, WithShared and
// WithFair are ErrInvalidArgument (a permit is neither reentrant, shared nor fair). Options are
// checked before anything is sent.
//
// Errors: ErrNotAcquired (every permit is held), ErrUnavailable, ErrAuth, ErrInternal,
// ErrClosed, as for Manager.Acquire; ErrInvalidArgument for a bad TTL or option, a name in the
// library's own namespaces (see Manager.Semaphore), and for another permit count recorded on
// the nodes (see Semaphore); ErrNullArgument for a nil Semaphore (or one not made by
// Manager.Semaphore); with AutoRenew, the errors of starting renewal, in which case the permit
// has been unlocked and freed.
func (s *Semaphore) Acquire(ttl time.Duration, opts ...LockOption) (*Lock, error) {
	return s.acquire(nil, "Semaphore.Acquire", ttl, nil, opts)
}

// TryAcquire makes one attempt to take a permit of the semaphore for ttl, with no retry:
// Acquire with NoWait, as TryLock is for a lock. NoWait and Wait are ErrInvalidArgument here
// (use Acquire to choose the wait with an option); other arguments, options and errors are
// those of Acquire.
func (s *Semaphore) TryAcquire(ttl time.Duration, opts ...LockOption) (*Lock, error) {
	return s.acquire(nil, "Semaphore.TryAcquire", ttl, &tryLockWait, opts)
}

// AcquireWait takes a permit of the semaphore for ttl, waiting while every permit is held until
// wait has passed, woken by a release (WithNotify(false): retrying after random pauses of up
// to the retry delay); no attempt starts after that, and the retry count does not apply:
// Acquire with Wait(wait), as LockWait is for a lock. wait must be in [0, MaxTTL] (0: a single
// attempt). NoWait and Wait are ErrInvalidArgument here; other arguments, options and errors
// are those of Acquire.
func (s *Semaphore) AcquireWait(ttl, wait time.Duration, opts ...LockOption) (*Lock, error) {
	var w lockOptions
	if ms, ok := millis(wait); ok {
		w.setWait(ms)
	} else {
		w.err = invalidf("wait must be in [0, %v], got %v", MaxTTL, wait)
	}
	return s.acquire(nil, "Semaphore.AcquireWait", ttl, &w, opts)
}

// AcquireContext takes a permit of the semaphore for ttl, waiting while every permit is held
// until ctx ends, woken by a release, as Manager.LockContext does for a lock: without a Wait or
// NoWait option it waits until ctx's deadline, or, without one, until ctx is cancelled (at
// most MaxTTL). When ctx ends, the call returns at once if it waits, or within one round trip
// if an attempt is under way, and holds no permit on any node. A context that has already
// ended returns at once, without contacting any node. Arguments and options are those of
// Acquire; a nil ctx is ErrInvalidArgument.
//
// Errors: those of Acquire, and those of Manager.LockContext: ErrCancelled for a cancelled ctx
// (also matching context.Canceled and the context's cause), ErrNotAcquired matching
// context.DeadlineExceeded for a deadline that passed, ErrClosed when the Manager is closed
// meanwhile.
func (s *Semaphore) AcquireContext(ctx context.Context, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	if ctx == nil {
		if err := s.check(); err != nil {
			return nil, err
		}
		return nil, invalidf("Semaphore.AcquireContext: nil context")
	}
	return s.acquire(ctx, "Semaphore.AcquireContext", ttl, nil, opts)
}

// check refuses a nil Semaphore, and one not made by Manager.Semaphore (the zero value).
func (s *Semaphore) check() error {
	switch {
	case s == nil:
		return nilReceiver("*Semaphore")
	case s.m == nil:
		return &Error{Status: StatusNullArgument, Message: "null argument: a Semaphore not made by Manager.Semaphore"}
	}
	return nil
}

// acquire is the body of Acquire, TryAcquire, AcquireWait and AcquireContext, as
// Manager.acquire is for a lock: fixed is the wait the method prescribes (TryAcquire,
// AcquireWait) or nil, ctx is AcquireContext's context or nil.
func (s *Semaphore) acquire(ctx context.Context, method string, ttl time.Duration, fixed *lockOptions, opts []LockOption) (*Lock, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	m := s.m
	o, ttlMs, err := acquireOptions(method, ttl, fixed, opts)
	if err != nil {
		return nil, err
	}
	// Which options a permit takes is the library's rule; its message reaches the caller.
	if err := contextWait(ctx, &o); err != nil {
		return nil, err
	}
	l, err := m.acquirePermitLease(ctx, s.name, s.permits, ttlMs, &o)
	if err != nil {
		return nil, err
	}
	return m.renewAcquired(l, &o)
}

// acquirePermitLease is acquireLease for a semaphore's permit: the one
// redlock_semaphore_acquire call, and the permit's slot and count read from the lease.
func (m *Manager) acquirePermitLease(ctx context.Context, name string, permits uint32, ttlMs C.uint32_t, o *lockOptions) (*Lock, error) {
	s := newScratch(name)
	defer s.free()
	out, st, err := m.acquireCall(ctx, o, func(opts *C.redlock_acquire_opts, out **C.redlock_lease) C.enum_redlock_status {
		return C.redlock_semaphore_acquire(m.ptr, s.res, s.n, C.uint32_t(permits), ttlMs, opts, out, s.err, errBufLen)
	})
	if err != nil {
		return nil, err
	}
	if st != C.REDLOCK_STATUS_OK {
		return nil, acquireError(ctx, st, s)
	}
	var slot, count C.uint32_t
	isPermit := bool(C.redlock_lease_permit(out, &slot, &count))
	l := newLock(out, name, nil, s)
	l.permit, l.slot, l.permits = isPermit, uint32(slot), uint32(count)
	return l, nil
}
