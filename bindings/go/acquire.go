package redlock

// #include <stdlib.h>
// #include "redlock.h"
import "C"

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"time"
)

// The body of every acquisition (Acquire, Lock, TryLock, LockWait, LockContext and the
// *Many methods): options and arguments checked, then the one C call under the manager's
// read lock.

// checkResource rejects names too long for the call's scratch buffer (newScratch) before
// copying them. Empty names are
// left to the library, which rejects them with its own message.
func checkResource(resource string) error {
	if len(resource) > MaxResourceLen {
		return invalidf("resource is %d bytes, more than the maximum of %d", len(resource), MaxResourceLen)
	}
	return nil
}

// acquire is the body of Acquire, Lock, TryLock, LockWait and LockContext. fixed, when
// non-nil, is the wait the method itself prescribes (TryLock, LockWait): a Wait or NoWait
// option then contradicts it and is refused. ctx is LockContext's context, nil for the others.
func (m *Manager) acquire(ctx context.Context, method, resource string, ttl time.Duration, fixed *lockOptions, opts []LockOption) (*Lock, error) {
	if m == nil {
		return nil, nilReceiver("*Manager")
	}
	o, ttlMs, err := acquireOptions(method, ttl, fixed, opts)
	if err != nil {
		return nil, err
	}
	if err := checkResource(resource); err != nil {
		return nil, err
	}
	if err := contextWait(ctx, &o); err != nil {
		return nil, err
	}
	l, err := m.acquireLease(ctx, resource, ttlMs, &o)
	if err != nil {
		return nil, err
	}
	return m.renewAcquired(l, &o)
}

// acquireMany is the body of AcquireMany, LockMany, TryLockMany, LockManyWait and
// LockManyContext: acquire for several resources at once.
func (m *Manager) acquireMany(ctx context.Context, method string, resources []string, ttl time.Duration, fixed *lockOptions, opts []LockOption) (*Lock, error) {
	if m == nil {
		return nil, nilReceiver("*Manager")
	}
	o, ttlMs, err := acquireOptions(method, ttl, fixed, opts)
	if err != nil {
		return nil, err
	}
	// The library checks the set (at least one, none twice, each name valid) and the options
	// a multi-resource lock takes; its message reaches the caller unchanged. Only the count is
	// checked here, as it bounds the C memory the call makes for the names.
	if len(resources) > MaxResources {
		return nil, invalidf("%d resources, more than the maximum of %d per call", len(resources), MaxResources)
	}
	if err := contextWait(ctx, &o); err != nil {
		return nil, err
	}
	l, err := m.acquireManyLease(ctx, resources, ttlMs, &o)
	if err != nil {
		return nil, err
	}
	return m.renewAcquired(l, &o)
}

// acquireOptions applies an acquisition's options and checks them with its TTL, which it
// converts. fixed is the wait the method prescribes (see acquire), or nil.
func acquireOptions(method string, ttl time.Duration, fixed *lockOptions, opts []LockOption) (lockOptions, C.uint32_t, error) {
	o, err := lockOptionsOf(opts)
	if err != nil {
		return o, 0, err
	}
	if fixed != nil {
		if o.waitSet {
			return o, 0, invalidf("%s does not take the Wait or NoWait option (use %s)", method, acquireMethod(method))
		}
		o.wait, o.waitMs = fixed.wait, fixed.waitMs
	}
	ttlMs, err := ttlMillis(ttl)
	if err != nil {
		return o, 0, err
	}
	if fixed != nil && fixed.err != nil { // LockWait's wait argument
		return o, 0, fixed.err
	}
	return o, ttlMs, nil
}

// acquireMethod names the method that takes every wait option: Acquire, AcquireMany for the
// *Many methods, or Semaphore.Acquire for a Semaphore's.
func acquireMethod(method string) string {
	switch {
	case strings.HasPrefix(method, "Semaphore."):
		return "Semaphore.Acquire"
	case strings.Contains(method, "Many"):
		return "AcquireMany"
	}
	return "Acquire"
}

// acquireFunc is the C call of an acquisition, made by acquireCall with the C options to
// pass: it writes the lease to out.
type acquireFunc func(opts *C.redlock_acquire_opts, out **C.redlock_lease) C.enum_redlock_status

// acquireLease makes the one C call of an acquisition, under the manager's read lock, and
// wraps the lease. ctx is LockContext's context, nil for the other methods.
func (m *Manager) acquireLease(ctx context.Context, resource string, ttlMs C.uint32_t, o *lockOptions) (*Lock, error) {
	s := newScratch(resource)
	defer s.free()
	out, st, err := m.acquireCall(ctx, o, func(opts *C.redlock_acquire_opts, out **C.redlock_lease) C.enum_redlock_status {
		return C.redlock_acquire(m.ptr, s.res, s.n, ttlMs, opts, out, s.err, errBufLen)
	})
	if err != nil {
		return nil, err
	}
	if st != C.REDLOCK_STATUS_OK {
		return nil, acquireError(ctx, st, s)
	}
	l := newLock(out, resource, nil, s)
	if o.fair {
		var ticket C.uint64_t
		l.fair = true
		l.hasTicket = bool(C.redlock_lease_ticket(out, &ticket))
		l.ticket = uint64(ticket)
	}
	return l, nil
}

// acquireManyLease is acquireLease for several resources: the one redlock_acquire_many call,
// with the names copied into C memory made for the call (cNames).
func (m *Manager) acquireManyLease(ctx context.Context, resources []string, ttlMs C.uint32_t, o *lockOptions) (*Lock, error) {
	s := newScratch("")
	defer s.free()
	names := newCNames(resources)
	defer names.free()
	out, st, err := m.acquireCall(ctx, o, func(opts *C.redlock_acquire_opts, out **C.redlock_lease) C.enum_redlock_status {
		return C.redlock_acquire_many(m.ptr, names.ptrs, names.lens, names.n, ttlMs, opts, out, s.err, errBufLen)
	})
	if err != nil {
		return nil, err
	}
	if st != C.REDLOCK_STATUS_OK {
		return nil, acquireError(ctx, st, s)
	}
	return newLock(out, resources[0], slices.Clone(resources), s), nil
}

// acquireCall makes an acquisition's C call, call, with the C options for o, under the
// manager's read lock. ctx is LockContext's context, nil for the other methods. err is
// ErrClosed when the manager is closed (or, with ctx, was closed during the call and
// cancelled it).
func (m *Manager) acquireCall(ctx context.Context, o *lockOptions, call acquireFunc) (out *C.redlock_lease, st C.enum_redlock_status, err error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.ptr == nil {
		return nil, 0, ErrClosed
	}
	if ctx != nil {
		return m.acquireCallContext(ctx, o, call)
	}
	opts, temp, err := m.acquireOpts(o)
	if err != nil {
		return nil, 0, err
	}
	st = call(opts, &out)
	if temp {
		m.freeAcquireOpts(opts)
	}
	runtime.KeepAlive(m)
	return out, st, nil
}
