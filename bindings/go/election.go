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
	"sync"
	"time"
	"unsafe"
)

// MaxLeaderValue is the longest value a candidate may campaign or proclaim with
// (Election.Campaign, Leadership.Proclaim), in bytes.
const MaxLeaderValue = 65536

// A compile-time check that MaxLeaderValue is the header's (see manager.go).
var (
	_ [MaxLeaderValue - C.REDLOCK_MAX_LEADER_VALUE]struct{}
	_ [C.REDLOCK_MAX_LEADER_VALUE - MaxLeaderValue]struct{}
)

// observeSlice bounds one redlock_leader_wait_change call of WaitChange and Observe: a new
// term wakes them at once; the slice only bounds how soon they notice their context ending
// (or the Manager closing), since the C call takes no cancel handle.
const observeSlice = 500 * time.Millisecond

// Election is a leader election over the quorum, made by Manager.Election: candidates
// Campaign, and one of them leads at a time; anyone reads the Leader or Observes each new
// one. It is a name, a TTL and its Manager, nothing more: safe for concurrent use, and
// nothing to free.
//
// Leadership is a fenced lock on the election, renewed automatically; its fencing token is
// the term, which strictly increases from one leader to the next (under the same assumptions
// as the lock). Give the term to every store the leader writes to, and have the store refuse a
// term below the highest it has seen: a deposed leader that still acts after a pause is then
// refused there. A leader is told it lost its leadership a margin before its validity ends
// (Leadership.Lost, WaitLost, IsLost, and the OnLost callback) and must then stop acting as
// one.
//
// On the nodes an election is its key ("redlock-elect:" followed by the lock key of its name)
// and a leader record ("redlock-leader:" followed by that key, a Redis hash kept without a TTL,
// as the fencing counters are): an election and a lock of the same name are independent.
type Election struct {
	m     *Manager
	name  string
	ttl   time.Duration
	ttlMs C.uint32_t
}

// Leader is an election's leader as a quorum of nodes held it when it was read
// (Election.Leader, WaitChange, Observe): a snapshot, which can change as soon as it is read.
type Leader struct {
	// Term is the leader's term: its leadership's fencing token, greater than every earlier
	// leader's.
	Term uint64
	// Value is the value it campaigned with, or the latest it proclaimed.
	Value string
	// Validity is how long its leadership stayed valid at least, as the nodes' TTLs said when
	// it was read (a live leader's is renewed).
	Validity time.Duration
}

// Election returns the leader election name, whose leaderships last ttl unless renewed (they
// are renewed automatically: see Campaign). It checks its arguments and sends nothing. The
// name is 1 to MaxResourceLen arbitrary bytes, as a resource's; ttl follows the rules of
// Manager.Acquire (its upper bound, the manager's maximum TTL, is checked by each Campaign).
// A name whose key would fall in the library's own namespaces (possible only with
// WithKeyPrefix) is refused by the first call instead. The Election stays tied to m: after
// Close, its calls return ErrClosed.
//
// Errors: ErrInvalidArgument for an empty or too long name or a bad TTL; ErrNullArgument for
// a nil Manager.
func (m *Manager) Election(name string, ttl time.Duration) (*Election, error) {
	if m == nil {
		return nil, nilReceiver("*Manager")
	}
	if name == "" {
		return nil, invalidf("election name must not be empty")
	}
	if err := checkResource(name); err != nil {
		return nil, err
	}
	ms, err := ttlMillis(ttl)
	if err != nil {
		return nil, err
	}
	return &Election{m: m, name: name, ttl: ttl, ttlMs: ms}, nil
}

// Name returns the election's name, as given to Manager.Election ("" for a nil Election).
func (e *Election) Name() string {
	if e == nil {
		return ""
	}
	return e.name
}

// TTL returns the TTL of the election's leaderships (0 for a nil Election).
func (e *Election) TTL() time.Duration {
	if e == nil {
		return 0
	}
	return e.ttl
}

// String describes the election for logs: its name and TTL.
func (e *Election) String() string {
	if e == nil {
		return "redlock.Election(nil)"
	}
	return fmt.Sprintf("redlock.Election{name: %q, ttl: %v}", e.name, e.ttl)
}

// check refuses a nil Election, and one not made by Manager.Election (the zero value).
func (e *Election) check() error {
	switch {
	case e == nil:
		return nilReceiver("*Election")
	case e.m == nil:
		return &Error{Status: StatusNullArgument, Message: "null argument: an Election not made by Manager.Election"}
	}
	return nil
}

// Campaign campaigns with value (an address, say: what Leader and Observe report; at most
// MaxLeaderValue bytes) until this candidate leads or ctx ends, and returns its Leadership
// (redlock_campaign). Waiting candidates are woken by the leader's resignation (a
// notification, not polling), or try again when its TTL runs out. When ctx ends the call
// returns at once if it waits, or within one round trip if an attempt is under way, and holds
// nothing on any node; a context that has ended already returns at once, without contacting
// any node. A nil ctx is ErrInvalidArgument.
//
// Without a Wait or NoWait option it waits until ctx's deadline, or, without one, until it
// leads or ctx is cancelled; NoWait makes it one attempt, Wait(d) gives up after d
// (WithNotify(false): polling instead of notification). The leadership is renewed
// automatically from the grant on, for as long as it lives; AutoRenew(maxHold) bounds it
// instead (0: that same default), with MaxExtensions and
// OnLost as for a lock (OnLost needs AutoRenew: pass AutoRenew(0) for the default bound; its
// callback gets Leadership.Lock). WithOwner, WithShared and WithFair are ErrInvalidArgument
// (the library's message says why): a leadership is neither reentrant, shared nor fair.
// Fenced changes nothing (a leadership is always fenced: its fencing token is the term).
//
// Errors: ErrNotAcquired (another leads and the wait is over; also context.DeadlineExceeded
// for a deadline), ErrCancelled (ctx cancelled; also context.Canceled), ErrInvalidArgument
// (value over MaxLeaderValue bytes, a TTL above the manager's maximum, a bad option; nothing
// is sent), ErrUnavailable, ErrAuth, ErrInternal, ErrClosed (the Manager is closed, also
// meanwhile), ErrNullArgument for a nil Election; the errors of starting renewal, in which
// case the leadership has been resigned (best effort) and freed.
func (e *Election) Campaign(ctx context.Context, value string, opts ...LockOption) (*Leadership, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	if ctx == nil {
		return nil, invalidf("Election.Campaign: nil context")
	}
	if len(value) > MaxLeaderValue {
		return nil, invalidf("a leader's value is at most %d bytes, got %d", MaxLeaderValue, len(value))
	}
	o, err := lockOptionsOf(opts)
	if err != nil {
		return nil, err
	}
	waitSet := o.waitSet
	if err := contextWait(ctx, &o); err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok && !waitSet {
		// The options' default: the library waits until this candidate leads (not the
		// manager's retry policy); ctx's cancellation ends the wait.
		o.wait, o.waitMs = waitRetries, 0
	}
	l, err := e.campaignLease(ctx, value, &o)
	if err != nil {
		return nil, err
	}
	ld := &Leadership{l: l, election: e.name, value: value}
	if err := ld.renew(e.m, &o); err != nil {
		_ = l.Unlock() // best effort: the error that matters is the renewal's
		l.Free()
		return nil, err
	}
	return ld, nil
}

// campaignLease makes the one redlock_campaign call under the manager's read lock, through
// the context plumbing of LockContext, and wraps the lease.
func (e *Election) campaignLease(ctx context.Context, value string, o *lockOptions) (*Lock, error) {
	m := e.m
	s := newScratch(e.name)
	defer s.free()
	var cv unsafe.Pointer
	if value != "" {
		cv = C.CBytes([]byte(value))
		defer C.free(cv)
	}
	out, st, err := m.acquireCall(ctx, o, func(opts *C.redlock_acquire_opts, out **C.redlock_lease) C.enum_redlock_status {
		return C.redlock_campaign(m.ptr, s.res, s.n, (*C.uint8_t)(cv), C.size_t(len(value)), e.ttlMs, opts, out, s.err, errBufLen)
	})
	if err != nil {
		return nil, err
	}
	if st != C.REDLOCK_STATUS_OK {
		return nil, acquireError(ctx, st, s)
	}
	return newLock(out, e.name, nil, s), nil
}

// Leader returns the current leader, read from every node (redlock_leader_get), or nil (and
// a nil error) when no leader is held by a quorum: nobody elected, the last leadership over,
// or a campaign under way. The read is bounded by the node timeouts; a ctx that has ended
// already returns at once (ErrCancelled, or ErrNotAcquired for a deadline, each matching the
// context's error), without contacting any node. A nil ctx is ErrInvalidArgument.
//
// Errors: ErrUnavailable (fewer than a quorum of nodes answered), ErrInvalidArgument (a name
// in the library's own namespaces), ErrInternal, ErrClosed, ErrNullArgument.
func (e *Election) Leader(ctx context.Context) (*Leader, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	if ctx == nil {
		return nil, invalidf("Election.Leader: nil context")
	}
	if err := contextEnded(ctx, time.Now()); err != nil {
		return nil, err
	}
	return e.read(func(m *C.redlock_manager, s cScratch, out **C.redlock_leader) C.enum_redlock_status {
		return C.redlock_leader_get(m, s.res, s.n, out, s.err, errBufLen)
	})
}

// WaitChange waits until the election has a leader whose term is above afterTerm (0: any
// leader) and returns it, woken by the nodes' announcement of each new term, not by polling
// (redlock_leader_wait_change, in calls of at most half a second so that ctx's end is seen).
// A leader elected meanwhile is returned as the latest, whatever terms were missed: pass the
// term returned to the next call to see every change in order. Nodes that cannot be read are
// waited out. A nil ctx is ErrInvalidArgument.
//
// Errors: ErrCancelled when ctx is cancelled, ErrNotAcquired when its deadline passes (each
// also matching the context's error), ErrInvalidArgument, ErrInternal, ErrClosed,
// ErrNullArgument.
func (e *Election) WaitChange(ctx context.Context, afterTerm uint64) (*Leader, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	if ctx == nil {
		return nil, invalidf("Election.WaitChange: nil context")
	}
	for {
		if err := waitEnded(ctx, afterTerm); err != nil {
			return nil, err
		}
		slice := observeSlice
		if dl, ok := ctx.Deadline(); ok {
			slice = min(slice, max(time.Until(dl), time.Millisecond))
		}
		l, err := e.waitChange(afterTerm, slice)
		switch {
		case err == nil && l != nil:
			return l, nil
		case err != nil && !errors.Is(err, ErrUnavailable):
			return nil, err
		}
	}
}

// waitEnded is WaitChange's error once ctx has ended, or nil.
func waitEnded(ctx context.Context, afterTerm uint64) error {
	cause := contextCause(ctx, time.Now())
	switch {
	case cause == nil:
		return nil
	case errors.Is(cause, context.DeadlineExceeded):
		return &Error{Status: StatusNotAcquired, cause: cause,
			Message: fmt.Sprintf("not acquired: no leader above term %d before the context's deadline (%v)", afterTerm, cause)}
	}
	return &Error{Status: StatusCancelled, Message: "cancelled: " + cause.Error(), cause: cause}
}

// waitChange is one redlock_leader_wait_change call of at most timeout: the leader, or nil
// when the time was up.
func (e *Election) waitChange(afterTerm uint64, timeout time.Duration) (*Leader, error) {
	ms, _ := millis(timeout)
	return e.read(func(m *C.redlock_manager, s cScratch, out **C.redlock_leader) C.enum_redlock_status {
		return C.redlock_leader_wait_change(m, s.res, s.n, C.uint64_t(afterTerm), C.uint32_t(ms), out, s.err, errBufLen)
	})
}

// read makes one call that hands out a redlock_leader, under the manager's read lock, and
// copies the snapshot out: nil for the call's "none" statuses (NOT_HELD: no leader;
// NOT_ACQUIRED: the time was up).
func (e *Election) read(call func(*C.redlock_manager, cScratch, **C.redlock_leader) C.enum_redlock_status) (*Leader, error) {
	m := e.m
	s := newScratch(e.name)
	defer s.free()
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.ptr == nil {
		return nil, ErrClosed
	}
	var out *C.redlock_leader
	st := call(m.ptr, s, &out)
	runtime.KeepAlive(m)
	switch st {
	case C.REDLOCK_STATUS_OK:
		defer C.redlock_leader_free(out)
		var n C.size_t
		p := C.redlock_leader_value(out, &n)
		l := &Leader{
			Term:     uint64(C.redlock_leader_term(out)),
			Validity: time.Duration(C.redlock_leader_validity_ms(out)) * time.Millisecond,
		}
		if p != nil && n > 0 {
			l.Value = C.GoStringN((*C.char)(unsafe.Pointer(p)), C.int(n))
		}
		return l, nil
	case C.REDLOCK_STATUS_NOT_HELD, C.REDLOCK_STATUS_NOT_ACQUIRED:
		return nil, nil
	}
	return nil, statusError(st, s.err)
}

// Observe returns a channel that receives every leader of the election from now on, in
// increasing term order: the current leader first (if any), then each new one as it is
// elected (woken by the nodes' announcements). Terms never repeat or go back; intermediate
// ones may be skipped (while the receiver is slow, say), never the latest. A proclamation
// keeps its term and is not sent again. A goroutine waits with WaitChange's calls and sends
// on the unbuffered channel; it closes the channel when ctx ends, when the Manager is closed,
// or on an error that retrying cannot mend (an invalid name); nodes that cannot be read are
// waited out. A nil ctx gives a closed channel. (Manager.Close waits for a call of the
// goroutine in progress: at most half a second.)
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	ch := make(chan Leader)
	if e.check() != nil || ctx == nil {
		close(ch)
		return ch
	}
	go e.observe(ctx, ch)
	return ch
}

// observe is Observe's goroutine.
func (e *Election) observe(ctx context.Context, ch chan<- Leader) {
	defer close(ch)
	var last uint64
	for ctx.Err() == nil {
		l, err := e.waitChange(last, observeSlice)
		if err != nil {
			var re *Error
			if !errors.As(err, &re) || re.Status == StatusInvalidArgument || re.Status == StatusNullArgument ||
				re.Status == StatusInvalidHandle {
				return // ErrClosed, or what no retry mends
			}
			if !errors.Is(err, ErrUnavailable) {
				select { // not expected (ErrInternal): a pause before the next try
				case <-ctx.Done():
				case <-time.After(observeSlice):
				}
			}
			continue
		}
		if l == nil {
			continue
		}
		select {
		case ch <- *l:
			last = l.Term
		case <-ctx.Done():
			return
		}
	}
}

// Leadership is this process's leadership of an election (Election.Campaign): a fenced Lock,
// renewed automatically, whose fencing token is the term. It is safe for concurrent use.
//
// Resign releases it (waking the waiting candidates); Proclaim changes the value observers
// read, keeping the term. Lost, IsLost and WaitLost tell of a lost leadership: renewal could
// not confirm it in time (told a margin before its validity ends: TTL/20, at least 2 ms, at
// most 250 ms) or reached a bound of AutoRenew. Free releases its memory without resigning (the
// leadership then ends with its TTL); a Leadership garbage collected without Free is freed by
// its Lock's finalizer, which stops renewal.
type Leadership struct {
	l        *Lock
	election string

	mu    sync.Mutex
	value string
}

// renew replaces the library's default renewal of a campaign with one started through
// Lock.startRenewal, which installs the callback that closes Lost and wakes WaitLost: bounded
// by AutoRenew's maximum hold if one was given, else for as long as the leadership lives
// (redlock_lease_auto_renew64 with no hold bound).
func (ld *Leadership) renew(m *Manager, o *lockOptions) error {
	hold := uint64(math.MaxUint64)
	if o.renew && o.maxHold != 0 {
		hold = uint64(o.maxHold)
	}
	if m.afterAcquire != nil {
		m.afterAcquire(ld.l)
	}
	var onLost func()
	if f := o.onLost; f != nil {
		l := ld.l // dropped when renewal stops (see lostState)
		onLost = func() { f(l) }
	}
	return ld.l.startRenewal(hold, o.maxExtensions, onLost)
}

// Term returns the leadership's term: its fencing token, greater than every earlier
// leader's (0 for a nil Leadership). It still answers after Free.
func (ld *Leadership) Term() uint64 {
	if ld == nil {
		return 0
	}
	return ld.l.FencingToken()
}

// Value returns the value it campaigned with, or the latest it proclaimed successfully.
func (ld *Leadership) Value() string {
	if ld == nil {
		return ""
	}
	ld.mu.Lock()
	defer ld.mu.Unlock()
	return ld.value
}

// Election returns the name of the election it leads.
func (ld *Leadership) Election() string {
	if ld == nil {
		return ""
	}
	return ld.election
}

// Lock returns the leadership's Lock (its FencingToken is the term; Unlock resigns).
func (ld *Leadership) Lock() *Lock {
	if ld == nil {
		return nil
	}
	return ld.l
}

// Proclaim changes the leader's value, keeping its term (redlock_lease_proclaim): done when a
// quorum confirmed it while the leadership was valid; readers of Leader see it (Observe does
// not send it again: the term is the same). A failed proclamation may still be read by some
// readers.
//
// Errors: ErrNotHeld (lost, resigned, or not confirmed in time), ErrInvalidArgument (a value
// over MaxLeaderValue bytes; nothing is sent), ErrUnavailable, ErrAuth, ErrInternal,
// ErrClosed (after Free), ErrNullArgument for a nil Leadership.
func (ld *Leadership) Proclaim(value string) error {
	if ld == nil {
		return nilReceiver("*Leadership")
	}
	if len(value) > MaxLeaderValue {
		return invalidf("a leader's value is at most %d bytes, got %d", MaxLeaderValue, len(value))
	}
	s := newScratch("")
	defer s.free()
	l := ld.l
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.ptr == nil {
		return ErrClosed
	}
	st := withCBytes(value, func(p *C.uint8_t, n C.size_t) C.enum_redlock_status {
		return C.redlock_lease_proclaim(l.ptr, p, n, s.err, errBufLen)
	})
	runtime.KeepAlive(l)
	if st != C.REDLOCK_STATUS_OK {
		return statusError(st, s.err)
	}
	ld.mu.Lock()
	ld.value = value
	ld.mu.Unlock()
	return nil
}

// Resign releases the leadership at once (Lock.Unlock), which wakes the waiting candidates.
// It does not free. Errors as Lock.Unlock (ErrNotHeld once lost or resigned).
func (ld *Leadership) Resign() error {
	if ld == nil {
		return nilReceiver("*Leadership")
	}
	return ld.l.Unlock()
}

// Lost returns a channel closed when renewal reports the leadership lost, for use in a
// select (never closed after Resign or Free: see Lock.Lost).
func (ld *Leadership) Lost() <-chan struct{} {
	if ld == nil {
		return nil
	}
	return ld.l.Lost()
}

// IsLost reports whether this process no longer leads: renewal reported the leadership lost,
// or its validity ran out, or it resigned, or it was freed.
func (ld *Leadership) IsLost() bool {
	if ld == nil {
		return true
	}
	return ld.l.IsLost() || !ld.l.Valid()
}

// WaitLost blocks until the leadership is lost (true) or timeout passes (false); true at once
// when it is lost or over already (IsLost).
func (ld *Leadership) WaitLost(timeout time.Duration) bool {
	if ld == nil {
		return true
	}
	return ld.IsLost() || ld.l.WaitLost(timeout) || ld.IsLost()
}

// LostReason says why renewal lost the leadership ("" while it is not lost).
func (ld *Leadership) LostReason() string {
	if ld == nil {
		return ""
	}
	return ld.l.LostReason()
}

// Validity returns how much longer the leadership is valid at least (0 once lost, resigned or
// freed).
func (ld *Leadership) Validity() time.Duration {
	if ld == nil {
		return 0
	}
	return ld.l.Validity()
}

// Free releases the leadership's memory without resigning (Lock.Free): renewal stops, and the
// leadership ends with its TTL. Idempotent.
func (ld *Leadership) Free() {
	if ld != nil {
		ld.l.Free()
	}
}

// String describes the leadership for logs: its election, term and validity.
func (ld *Leadership) String() string {
	if ld == nil {
		return "redlock.Leadership(nil)"
	}
	return fmt.Sprintf("redlock.Leadership{election: %q, term: %d, validity: %v}", ld.election, ld.Term(), ld.Validity())
}
