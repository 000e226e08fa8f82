package redlock

// #include <stdlib.h>
// #include "redlock.h"
import "C"

// The C acquisition options (redlock_acquire_opts) a manager makes once and shares, and
// those it makes for one call.

// maxWaitOpts bounds the options a Manager keeps for Wait durations (per duration and
// fencing): programs use a few fixed waits, each then costs no allocation; a program that
// computes a new wait for every call gets options made and freed for each of those calls
// (three cgo calls, next to an acquisition's network round trips).
const maxWaitOpts = 32

// waitKey names the options of a Wait duration.
type waitKey struct {
	ms     uint32
	fenced bool
	poll   bool // WithNotify(false)
	shared bool // WithShared
}

// fixedOptsKey gives the options in Manager.fixedOpts[i]: every combination of the manager's
// retry policy or one attempt, with or without a fencing token, exclusive or shared (i + 1
// has the bits 4: one attempt, 2: fenced, 1: shared), but the defaults (retry policy, no
// token, exclusive), which are redlock_acquire's NULL options.
func fixedOptsKey(i int) (wait waitMode, fenced, shared bool) {
	b := i + 1
	wait = waitRetries
	if b&4 != 0 {
		wait = waitNone
	}
	return wait, b&2 != 0, b&1 != 0
}

// fixedOptsIndex is the inverse of fixedOptsKey; -1 for the defaults.
func fixedOptsIndex(wait waitMode, fenced, shared bool) int {
	b := 0
	if wait == waitNone {
		b |= 4
	}
	if fenced {
		b |= 2
	}
	if shared {
		b |= 1
	}
	return b - 1
}

// makeFixedOpts makes the manager's fixedOpts (New's last step).
func (m *Manager) makeFixedOpts() error {
	for i := range m.fixedOpts {
		wait, fenced, shared := fixedOptsKey(i)
		o, err := m.newAcquireOpts(wait, 0, fenced, false, shared)
		if err != nil {
			return err
		}
		m.fixedOpts[i] = o
	}
	return nil
}

// newAcquireOpts makes C acquisition options. Shared ones are never changed afterwards.
// poll (WithNotify(false)) matters with waitFor only; shared is WithShared.
func (m *Manager) newAcquireOpts(wait waitMode, waitMs uint32, fenced, poll, shared bool) (*C.redlock_acquire_opts, error) {
	o := C.redlock_acquire_opts_new()
	if o == nil {
		return nil, newInternal("redlock_acquire_opts_new: out of memory")
	}
	m.optsLive.Add(1)
	var st C.enum_redlock_status = C.REDLOCK_STATUS_OK
	switch wait {
	case waitNone:
		st = C.redlock_acquire_opts_set_wait_ms(o, 0)
	case waitFor:
		st = C.redlock_acquire_opts_set_wait_ms(o, C.uint32_t(waitMs))
		if st == C.REDLOCK_STATUS_OK && poll {
			st = C.redlock_acquire_opts_set_notify(o, false)
		}
	}
	if st == C.REDLOCK_STATUS_OK && fenced {
		st = C.redlock_acquire_opts_set_fenced(o, true)
	}
	if st == C.REDLOCK_STATUS_OK && shared {
		st = C.redlock_acquire_opts_set_shared(o, true)
	}
	if st != C.REDLOCK_STATUS_OK { // only NULL_ARGUMENT, which o is not
		m.freeAcquireOpts(o)
		return nil, &Error{Status: Status(st), Message: "internal error: setting acquisition options failed"}
	}
	return o, nil
}

// newOwnedAcquireOpts makes options for o, owner and fairness included, for one call.
func (m *Manager) newOwnedAcquireOpts(o *lockOptions) (*C.redlock_acquire_opts, error) {
	opts, err := m.newAcquireOpts(o.wait, o.waitMs, o.fenced, o.poll, o.shared)
	if err != nil {
		return nil, err
	}
	if o.ownerSet {
		// Checked by WithOwner already; should the library refuse it all the same, its
		// message says which argument and why.
		owner := C.CBytes([]byte(o.owner))
		s := newScratch("")
		st := C.redlock_acquire_opts_set_owner_err(opts, (*C.uint8_t)(owner), C.size_t(len(o.owner)), s.err, errBufLen)
		C.free(owner)
		if st != C.REDLOCK_STATUS_OK {
			err := statusError(st, s.err)
			s.free()
			m.freeAcquireOpts(opts)
			return nil, err
		}
		s.free()
	}
	if o.fair || o.dropOutMs != 0 {
		st := C.redlock_acquire_opts_set_fair(opts, C.bool(o.fair))
		if st == C.REDLOCK_STATUS_OK && o.dropOutMs != 0 {
			st = C.redlock_acquire_opts_set_drop_out_ms(opts, C.uint32_t(o.dropOutMs))
		}
		if st != C.REDLOCK_STATUS_OK { // checked by WithDropOut already
			m.freeAcquireOpts(opts)
			return nil, &Error{Status: Status(st), Message: "setting the fair lock's options failed"}
		}
	}
	return opts, nil
}

func (m *Manager) freeAcquireOpts(o *C.redlock_acquire_opts) {
	C.redlock_acquire_opts_free(o)
	m.optsLive.Add(-1)
}

// acquireOpts returns the C options for o, to pass to redlock_acquire: nil for the defaults,
// else shared options of the manager, or, when temp is true, options made for this call that
// the caller frees after it. The caller holds m.mu's read lock, with m.ptr non-nil.
func (m *Manager) acquireOpts(o *lockOptions) (opts *C.redlock_acquire_opts, temp bool, err error) {
	if o.ownerSet || o.fair || o.dropOutMs != 0 {
		// Owners are often per request or per job: never kept. Fair acquisitions (which
		// queue, and so are slow next to making options) get options of their own too.
		opts, err = m.newOwnedAcquireOpts(o)
		return opts, err == nil, err
	}
	if o.wait != waitFor {
		if i := fixedOptsIndex(o.wait, o.fenced, o.shared); i >= 0 {
			return m.fixedOpts[i], false, nil
		}
		return nil, false, nil
	}
	k := waitKey{o.waitMs, o.fenced, o.poll, o.shared}
	m.waitMu.Lock()
	opts = m.waitOpts[k]
	if opts == nil && len(m.waitOpts) < maxWaitOpts { // first use: kept
		opts, err = m.newAcquireOpts(waitFor, o.waitMs, o.fenced, o.poll, o.shared)
		if err == nil {
			if m.waitOpts == nil {
				m.waitOpts = make(map[waitKey]*C.redlock_acquire_opts)
			}
			m.waitOpts[k] = opts
		}
		m.waitMu.Unlock()
		return opts, false, err
	}
	m.waitMu.Unlock()
	if opts != nil {
		return opts, false, nil
	}
	// The manager keeps enough: options for this call only.
	opts, err = m.newAcquireOpts(waitFor, o.waitMs, o.fenced, o.poll, o.shared)
	return opts, err == nil, err
}
