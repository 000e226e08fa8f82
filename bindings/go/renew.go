package redlock

// #include <stdlib.h>
// #include "redlock.h"
// extern void redlockGoOnLost(struct redlock_lease *lease, void *userdata);
import "C"

import (
	"math"
	"runtime"
	"runtime/cgo"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// renewHandles counts the live callback handles, read by the package's tests to check that
// Free and the finalizer release them.
var renewHandles atomic.Int64

// lostState records that a lease was lost and runs the user's callback. The C callback reaches
// it through a cgo.Handle, which keeps it reachable until the Lock is freed. It refers to its
// Lock only through the callback of the OnLost option, and only while renewal is on: stopped
// drops the callback, so that a Lock whose renewal ended can be finalized.
type lostState struct {
	ch   chan struct{} // closed when the lease is reported lost
	once sync.Once

	mu     sync.Mutex
	onLost func()
	// stop is non-nil while renewal is on as far as this package knows (from a successful
	// start until a loss, Unlock, StopRenewal or Free), and closed when it stops: WaitLost
	// returns as soon as renewal stops, like redlock_lease_wait_lost.
	stop chan struct{}
}

func newLostState() *lostState {
	return &lostState{ch: make(chan struct{})}
}

// fire runs on the library's renewal thread: it must return quickly, so the user's callback
// runs in a goroutine of its own.
func (s *lostState) fire() {
	s.once.Do(func() {
		close(s.ch)
		s.mu.Lock()
		f := s.onLost
		s.endLocked()
		s.mu.Unlock()
		if f != nil {
			go f()
		}
	})
}

func (s *lostState) fired() bool {
	select {
	case <-s.ch:
		return true
	default:
		return false
	}
}

// stopped records that renewal is off (Unlock, StopRenewal, Free) and drops the callback.
func (s *lostState) stopped() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endLocked()
}

func (s *lostState) endLocked() {
	s.onLost = nil
	if s.stop != nil {
		close(s.stop)
		s.stop = nil
	}
}

// stopChan returns the channel closed when the current renewal stops, nil if none is on.
func (s *lostState) stopChan() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stop
}

// redlockGoOnLost is the redlock_lost_fn given to the library. userdata is C memory holding
// the cgo.Handle of a lostState; it stays valid until the lease is freed, and the library runs
// no callback after redlock_lease_free has returned.
//
//export redlockGoOnLost
func redlockGoOnLost(lease *C.redlock_lease, userdata unsafe.Pointer) {
	if userdata == nil {
		return
	}
	if s, ok := (*(*cgo.Handle)(userdata)).Value().(*lostState); ok {
		s.fire()
	}
}

// AutoRenew turns on auto-renewal of an acquired lock; the AutoRenew option (with OnLost and
// MaxExtensions) does the same at acquisition. The manager's renewal thread extends the lock
// to its TTL whenever a third of it has passed, and restores the key on a node that lost it
// while the lock is valid. It never recreates an expired or released lock.
//
// Renewal stops after maxHold from the acquisition (0 means the library's default, one hour)
// or after maxExtensions automatic extensions (0 means no limit besides the hold time). When a
// renewal cannot be confirmed before the validity ends, or a bound is reached, the lock is
// reported lost shortly before its validity ends: IsLost turns true, Validity reads 0 for
// good, LostReason says why, the channel returned by Lost is closed, and onLost (may be nil)
// is called once, in a goroutine of its own. Calling AutoRenew again replaces the bounds and
// the callback.
//
// Unlock stops renewal first; StopRenewal stops it without unlocking; Free (and the finalizer)
// stop it too. Renewal continues after the Manager is closed. If onLost refers to the Lock,
// the Lock stays reachable while renewal is on.
//
// Errors: ErrNotHeld (unlocked, lost or expired), ErrInvalidArgument (maxHold < 0 or above
// MaxTTL, maxExtensions < 0 or above 2³²−1), ErrInternal (the renewal thread could not be
// started), ErrClosed (after Free).
func (l *Lock) AutoRenew(maxHold time.Duration, maxExtensions int, onLost func()) error {
	if l == nil {
		return nilReceiver("*Lock")
	}
	hold, ok := millis(maxHold)
	if !ok {
		return invalidf("maximum hold must be in [0, %v], got %v", MaxTTL, maxHold)
	}
	if maxExtensions < 0 || uint64(maxExtensions) > math.MaxUint32 {
		return invalidf("maximum extensions must be in [0, %d], got %d", uint32(math.MaxUint32), maxExtensions)
	}
	return l.startRenewal(uint64(hold), uint32(maxExtensions), onLost)
}

// startRenewal is AutoRenew with checked arguments (milliseconds).
func (l *Lock) startRenewal(hold uint64, maxExtensions uint32, onLost func()) error {
	s := newScratch("")
	defer s.free()

	// The read lock, like every other call, so that IsLost, Renewing and friends are not held
	// up behind this call while it waits for an Unlock or Extend in flight; renewMu
	// serialises it with StopRenewal and Unlock, so that each records its effect on renewal
	// in the order the library applied them. The handle and its C memory are created once,
	// under both, and released by free under the write lock.
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.ptr == nil {
		return ErrClosed
	}
	l.renewMu.Lock()
	defer l.renewMu.Unlock()
	if l.userdata == nil {
		p := C.malloc(C.size_t(unsafe.Sizeof(cgo.Handle(0))))
		*(*cgo.Handle)(p) = cgo.NewHandle(l.lost)
		l.userdata = p
		renewHandles.Add(1)
	}
	l.lost.mu.Lock()
	previous := l.lost.onLost
	l.lost.onLost = onLost
	l.lost.mu.Unlock()

	st := C.redlock_lease_auto_renew64(l.ptr, C.uint64_t(hold), C.uint32_t(maxExtensions),
		C.redlock_lost_fn(C.redlockGoOnLost), l.userdata, s.err, errBufLen)

	// Record what is now true. The lock may have been lost meanwhile (the renewal thread's
	// callback does not take renewMu): rather than guess the order, ask the library, which
	// never waits to answer. A loss reported after the question is recorded after this,
	// under lost.mu, and has the last word.
	f := onLost
	if st != C.REDLOCK_STATUS_OK {
		f = previous // the library's settings are unchanged
	}
	l.lost.mu.Lock()
	if C.redlock_lease_is_renewing(l.ptr) {
		l.lost.onLost = f
		if l.lost.stop == nil {
			l.lost.stop = make(chan struct{})
		}
	} else {
		l.lost.endLocked() // drops the callback: nothing to call any more
	}
	l.lost.mu.Unlock()
	runtime.KeepAlive(l)
	if st != C.REDLOCK_STATUS_OK {
		return statusError(st, s.err)
	}
	return nil
}

// releaseRenewal deletes the callback's handle and its C memory. Called by free with the
// write lock held, after redlock_lease_free, when no callback can be running any more.
func (l *Lock) releaseRenewal() {
	if l.userdata != nil {
		(*(*cgo.Handle)(l.userdata)).Delete()
		C.free(l.userdata)
		l.userdata = nil
		renewHandles.Add(-1)
	}
}

// StopRenewal stops auto-renewal without unlocking, waiting for a renewal in flight. The lock
// then expires after its TTL unless extended or unlocked. No effect when renewal is off or
// after Free.
func (l *Lock) StopRenewal() {
	if l == nil {
		return
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.ptr == nil {
		return
	}
	l.renewMu.Lock() // see startRenewal
	defer l.renewMu.Unlock()
	C.redlock_lease_stop_renewal(l.ptr)
	runtime.KeepAlive(l)
	l.lost.stopped()
}

// IsLost reports whether auto-renewal has reported the lock lost (a renewal failed or a bound
// was reached). A lost lock never becomes valid again. A lock that merely expired without
// auto-renewal is not "lost": check Valid. After Free, IsLost reports whether the loss was
// reported before. Like Renewing, it does not wait for an Unlock, Extend or renewal round in
// progress on the lock.
func (l *Lock) IsLost() bool {
	if l == nil {
		return false
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.ptr == nil {
		return l.lost.fired()
	}
	lost := C.redlock_lease_is_lost(l.ptr)
	runtime.KeepAlive(l)
	return bool(lost)
}

// Lost returns a channel that is closed when auto-renewal reports the lock lost, for use in a
// select. It is never closed if the lock is not lost (for example if it is unlocked first, or
// auto-renewal was never turned on).
func (l *Lock) Lost() <-chan struct{} {
	if l == nil {
		return nil
	}
	return l.lost.ch
}

// WaitLost blocks while auto-renewal is on, until the lock is reported lost or timeout
// passes, and reports whether it is lost. Like redlock_lease_wait_lost it returns false at
// once when renewal is off (never started, stopped, unlocked, freed) and as soon as renewal
// stops while it waits. It is built on channels, so a long wait never holds up Free.
func (l *Lock) WaitLost(timeout time.Duration) bool {
	if l == nil {
		return false
	}
	if timeout <= 0 {
		return l.IsLost()
	}
	stop := l.lost.stopChan()
	if stop == nil || !l.Renewing() {
		return l.IsLost()
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-l.lost.ch:
		return true
	case <-stop:
		return l.IsLost()
	case <-t.C:
		return l.IsLost()
	}
}

// renewAcquired starts the auto-renewal the AutoRenew option asks for on a lock just
// acquired, and returns it; if renewal cannot start, the lock is unlocked (best effort) and
// freed, and the error returned.
func (m *Manager) renewAcquired(l *Lock, o *lockOptions) (*Lock, error) {
	if !o.renew {
		return l, nil
	}
	// Renewal is started here, with redlock_lease_auto_renew, rather than requested from
	// redlock_acquire (redlock_acquire_opts_set_auto_renew): only the former installs the
	// on_lost callback, which closes the Lost channel and wakes WaitLost, with or without
	// an OnLost callback.
	if m.afterAcquire != nil {
		m.afterAcquire(l)
	}
	var onLost func()
	if f := o.onLost; f != nil {
		// A reference to l: dropped when renewal stops (see lostState), so that it keeps l
		// reachable only while the lock is renewed.
		onLost = func() { f(l) }
	}
	if err := l.startRenewal(uint64(o.maxHold), o.maxExtensions, onLost); err != nil {
		// Acquired but not renewed: release it rather than hand back a lock the caller asked
		// to have renewed. Best effort: the error that matters is the renewal's.
		_ = l.Unlock()
		l.Free()
		return nil, err
	}
	return l, nil
}
