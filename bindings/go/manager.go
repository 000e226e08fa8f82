package redlock

// #include <stdlib.h>
// #include "redlock.h"
import "C"

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// MaxTTL is the longest duration the C ABI can express, 2³²−1 milliseconds (about 49.7
	// days): the bound of every wait, delay and timeout, and the largest maximum TTL
	// WithMaxTTL accepts. A lock's TTL is bounded further by its manager's maximum TTL
	// (DefaultMaxTTL unless set with WithMaxTTL).
	MaxTTL = math.MaxUint32 * time.Millisecond
	// DefaultMaxTTL is a manager's maximum TTL unless WithMaxTTL sets another: the longest
	// TTL its locks may have (hold locks longer with auto-renewal), and how long a node that
	// may have lost keys (it restarted, or its keyspace was flushed) stays in restart
	// quarantine.
	DefaultMaxTTL = 60 * time.Second
	// MinTTL is the shortest TTL the library ever accepts: a TTL must exceed its drift
	// allowance, TTL × drift factor + 2 ms, which makes 3 ms the minimum at the default factor
	// (0.01) and more at larger factors. Shorter TTLs give ErrInvalidArgument.
	MinTTL = 3 * time.Millisecond
	// MaxResourceLen is the longest resource name accepted, in bytes.
	MaxResourceLen = 1024
	// MaxOwnerLen is the longest owner id of a reentrant lock (WithOwner), in bytes.
	MaxOwnerLen = 512
	// MaxResources is the most resources one call of the *Many methods (AcquireMany,
	// LockMany, TryLockMany, LockManyWait, LockManyContext) may name.
	MaxResources = 1000
	// MaxPermits is the most permits a semaphore may have (Manager.Semaphore).
	MaxPermits = 1000
	// DefaultDropOut is a fair waiter's drop-out time (WithFair, WithDropOut) when none is
	// given and the lock's TTL is not shorter.
	DefaultDropOut = 5 * time.Second
	// MinDropOut and MaxDropOut bound the drop-out time WithDropOut accepts.
	MinDropOut = 20 * time.Millisecond
	MaxDropOut = time.Hour
	// MaxLabelLen is the longest holder label (WithLabel), in bytes.
	MaxLabelLen = 256
	// MaxKeyPrefixLen is the longest lock key prefix (WithKeyPrefix), in bytes.
	MaxKeyPrefixLen = 256
	// DefaultKeyPrefix is the prefix of every lock key unless WithKeyPrefix sets another: the
	// key of a resource is the prefix followed by the resource's bytes.
	DefaultKeyPrefix = "redlock:"
)

// Compile-time checks that the constants above are the header's: each array length is
// negative, a compile error, unless both sides are equal.
var (
	_ [MaxResourceLen - C.REDLOCK_MAX_RESOURCE_LEN]struct{}
	_ [C.REDLOCK_MAX_RESOURCE_LEN - MaxResourceLen]struct{}
	_ [MaxOwnerLen - C.REDLOCK_MAX_OWNER_LEN]struct{}
	_ [C.REDLOCK_MAX_OWNER_LEN - MaxOwnerLen]struct{}
	_ [MaxResources - C.REDLOCK_MAX_RESOURCES]struct{}
	_ [C.REDLOCK_MAX_RESOURCES - MaxResources]struct{}
	_ [MaxPermits - C.REDLOCK_MAX_PERMITS]struct{}
	_ [C.REDLOCK_MAX_PERMITS - MaxPermits]struct{}
	_ [MaxLabelLen - C.REDLOCK_MAX_LABEL_LEN]struct{}
	_ [C.REDLOCK_MAX_LABEL_LEN - MaxLabelLen]struct{}
	_ [MaxKeyPrefixLen - C.REDLOCK_MAX_KEY_PREFIX_LEN]struct{}
	_ [C.REDLOCK_MAX_KEY_PREFIX_LEN - MaxKeyPrefixLen]struct{}
	_ [MaxTTL/time.Millisecond - C.REDLOCK_MAX_TTL_MS]struct{}
	_ [C.REDLOCK_MAX_TTL_MS - MaxTTL/time.Millisecond]struct{}
	_ [DefaultDropOut/time.Millisecond - C.REDLOCK_DEFAULT_DROP_OUT_MS]struct{}
	_ [C.REDLOCK_DEFAULT_DROP_OUT_MS - DefaultDropOut/time.Millisecond]struct{}
	_ [minDropOutMs - C.REDLOCK_MIN_DROP_OUT_MS]struct{}
	_ [C.REDLOCK_MIN_DROP_OUT_MS - minDropOutMs]struct{}
	_ [maxDropOutMs - C.REDLOCK_MAX_DROP_OUT_MS]struct{}
	_ [C.REDLOCK_MAX_DROP_OUT_MS - maxDropOutMs]struct{}
)

// The bounds of a drop-out time in milliseconds, as WithDropOut checks them.
const (
	minDropOutMs = uint32(MinDropOut / time.Millisecond)
	maxDropOutMs = uint32(MaxDropOut / time.Millisecond)
)

// headerVersion is the version of include/redlock.h this package was compiled against.
var headerVersion = fmt.Sprintf("%d.%d.%d",
	C.REDLOCK_VERSION_MAJOR, C.REDLOCK_VERSION_MINOR, C.REDLOCK_VERSION_PATCH)

// Version returns the version of the linked library, for example "0.1.0".
func Version() string {
	return C.GoString(C.redlock_version())
}

// LinkMode returns "static" (the default build) or "dynamic" (built with the redlock_dynamic
// tag): how the library was linked into this binary.
func LinkMode() string {
	return linkMode
}

// Counters of handles freed, read by the package's tests to check that Close, Free and the
// finalizers release C memory.
var managersFreed, locksFreed atomic.Int64

// Manager acquires locks on N independent Redis masters; a lock needs a quorum of
// N/2+1 of them. Create one with New and share it: it is safe for concurrent use by any
// number of goroutines, and it keeps a pool of connections.
//
// Close frees it. Locks it made stay usable after Close (each keeps what it needs alive).
// A Manager that is garbage collected without Close is freed by a finalizer.
type Manager struct {
	// mu guards ptr: read-locked for every C call on the manager, write-locked by Close, so
	// the C manager is never freed while a call on it is running.
	mu     sync.RWMutex
	ptr    *C.redlock_manager
	nodes  int
	quorum int

	// Immutable C acquisition options (redlock_acquire_opts), made once and shared by every
	// call that needs them, so that the hot path allocates none: fixedOpts are made by New
	// (see fixedOptsIndex; the defaults need none, as redlock_acquire takes NULL for them),
	// waitOpts on first use of a Wait duration, at most maxWaitOpts of them (further
	// durations get options of their own for the call). redlock_acquire only reads options,
	// so any number of calls may share one. All are used under mu's read lock and freed by
	// free under its write lock; waitMu guards the map.
	fixedOpts [7]*C.redlock_acquire_opts
	waitMu    sync.Mutex
	waitOpts  map[waitKey]*C.redlock_acquire_opts
	// optsLive counts this manager's C options alive (shared or made for one call), read by
	// the package's tests to check that nothing leaks.
	optsLive atomic.Int64

	// The cancel handles of the LockContext calls in progress, which Close fires (so that a
	// call waiting for a context that never ends cannot hold Close up); closing is set by
	// Close before it fires them, and refuses new ones. Guarded by cancelMu.
	cancelMu sync.Mutex
	closing  bool
	cancels  map[*C.redlock_cancel]struct{}

	// afterAcquire, when set (by the package's tests only), runs between a successful
	// acquisition and the start of auto-renewal requested by the AutoRenew option.
	afterAcquire func(*Lock)
}

// New creates a manager for the given nodes, each "redis://[user:password@]host[:port][/db]"
// (port 6379 by default), the same with "rediss://" for TLS (see WithTLSCAFile), or
// "host:port". It checks every option and URL and resolves every host name, but makes no
// connection until the first lock.
//
// Errors: ErrInvalidArgument for no nodes, a malformed URL (the message never contains the
// password), a node listed twice, a host that does not resolve, a TLS file that cannot be
// read or is not the PEM it should be (the message names its path), or a bad option.
func New(nodes []string, opts ...Option) (*Manager, error) {
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	for i, u := range nodes {
		if strings.IndexByte(u, 0) >= 0 {
			return nil, invalidf("node %d: URL contains a NUL byte", i)
		}
	}
	cfg := C.redlock_config_new()
	if cfg == nil {
		return nil, newInternal("redlock_config_new: out of memory")
	}
	defer C.redlock_config_free(cfg)
	s := newScratch("")
	defer s.free()
	for _, u := range nodes {
		st := withCString(u, func(cu *C.char) C.enum_redlock_status {
			return C.redlock_config_add_node(cfg, cu, s.err, errBufLen)
		})
		if st != C.REDLOCK_STATUS_OK {
			return nil, statusError(st, s.err)
		}
	}
	if err := o.apply(cfg, s.err); err != nil {
		return nil, err
	}
	var ptr *C.redlock_manager
	if st := C.redlock_manager_new(cfg, &ptr, s.err, errBufLen); st != C.REDLOCK_STATUS_OK {
		return nil, statusError(st, s.err)
	}
	m := &Manager{
		ptr:    ptr,
		nodes:  int(C.redlock_manager_node_count(ptr)),
		quorum: int(C.redlock_manager_quorum(ptr)),
	}
	if err := m.makeFixedOpts(); err != nil {
		m.free()
		return nil, err
	}
	runtime.SetFinalizer(m, (*Manager).free)
	return m, nil
}

// free releases the C manager once. It is Close's body and the finalizer; it never unlocks.
// It first cancels the LockContext calls in progress, then waits for every call.
func (m *Manager) free() {
	m.fireCancels()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ptr != nil {
		C.redlock_manager_free(m.ptr)
		m.ptr = nil
		managersFreed.Add(1)
	}
	// Under the write lock no call is using the options any more.
	for i, o := range m.fixedOpts {
		if o != nil {
			m.freeAcquireOpts(o)
			m.fixedOpts[i] = nil
		}
	}
	for k, o := range m.waitOpts {
		m.freeAcquireOpts(o)
		delete(m.waitOpts, k)
	}
}

// Close frees the manager and its idle connections. It cancels the LockContext calls in
// progress (LockManyContext and Semaphore.AcquireContext too), which return ErrClosed, waits
// for the other calls in progress on this manager (a Lock may block for its retries, an
// Acquire for its Wait) and makes later calls return ErrClosed. It never unlocks anything:
// locks made by this manager stay usable and can still be unlocked, extended and freed. Close
// is idempotent and always returns nil.
func (m *Manager) Close() error {
	if m == nil {
		return nil
	}
	m.free()
	runtime.SetFinalizer(m, nil)
	return nil
}

// NodeCount returns the number of nodes, N (also after Close; 0 for a nil Manager).
func (m *Manager) NodeCount() int {
	if m == nil {
		return 0
	}
	return m.nodes
}

// Quorum returns the number of nodes that must grant a lock, N/2+1 (also after Close; 0 for
// a nil Manager).
func (m *Manager) Quorum() int {
	if m == nil {
		return 0
	}
	return m.quorum
}

// Acquire acquires resource for ttl. By default it retries as configured by WithRetry (by
// default up to 3 more attempts, each after a random pause of up to 200 ms); NoWait makes it
// a single attempt, and Wait(d) has it wait until d has passed, woken by the release (see
// WithNotify). It blocks for a bounded time, never forever (LockContext waits until a
// context ends).
//
// The resource is 1 to MaxResourceLen arbitrary bytes; the lock is the Redis key made of the
// manager's key prefix ("redlock:" unless set with WithKeyPrefix) followed by them. The TTL
// must be > 0 and at most the manager's maximum TTL (WithMaxTTL; DefaultMaxTTL, 60 s, by
// default); it is rounded up to whole milliseconds and must exceed its drift allowance (so
// at least MinTTL). Hold a lock longer with auto-renewal.
//
// Options: NoWait and Wait set how long to try (the last one given counts); Fenced gives the
// lock a fencing token (FencingToken); WithOwner makes it reentrant, WithShared shared (a read
// lock); AutoRenew (with OnLost and MaxExtensions) starts auto-renewal as soon as the lock is
// acquired. Without options this is a plain lock, taken with the manager's retry policy.
// Options are checked before anything is sent. AcquireMany takes several resources at once.
//
// The common option sets cost no allocation of C memory: the manager keeps the C options
// (redlock_acquire_opts) it needs, made once, until Close.
//
// Errors: ErrNotAcquired (held elsewhere), ErrUnavailable (too many nodes failed or in
// restart quarantine for a quorum to be possible; the message names each node's outcome, and
// for a quarantined node why), ErrAuth (also an ErrUnavailable: nodes that refused the
// credentials stood between the others and a quorum),
// ErrInvalidArgument (bad TTL, resource or option), ErrInternal, ErrClosed; with AutoRenew,
// the errors of starting renewal, in which case the lock has been unlocked and freed. The
// returned Lock must eventually be unlocked (or left to expire) and freed (or left to the
// garbage collector).
func (m *Manager) Acquire(resource string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	return m.acquire(nil, "Acquire", resource, ttl, nil, opts)
}

// Lock is Acquire: it acquires resource for ttl, retrying as configured by WithRetry unless a
// NoWait or Wait option says otherwise. Arguments, options and errors are those of Acquire.
func (m *Manager) Lock(resource string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	return m.acquire(nil, "Lock", resource, ttl, nil, opts)
}

// TryLock makes one attempt to acquire resource for ttl, with no retry: Acquire with NoWait.
// It takes the options of Acquire except NoWait and Wait, which are ErrInvalidArgument here
// (use Acquire to choose the wait with an option); arguments and errors are those of
// Acquire.
func (m *Manager) TryLock(resource string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	return m.acquire(nil, "TryLock", resource, ttl, &tryLockWait, opts)
}

// tryLockWait is TryLock's wait: one attempt.
var tryLockWait = lockOptions{wait: waitNone}

// LockWait acquires resource for ttl, waiting while it is held elsewhere until wait has
// passed, woken by the release (WithNotify(false): retrying after random pauses of up to the
// retry delay set by WithRetry); no attempt starts after that, and the retry count does not
// apply: Acquire with Wait(wait). wait must be ≥ 0 (0 means a single attempt) and at most
// MaxTTL; it is rounded up to whole milliseconds. It takes the options of Acquire except
// NoWait and Wait, which are ErrInvalidArgument here; other arguments and errors are those of
// Acquire.
func (m *Manager) LockWait(resource string, ttl, wait time.Duration, opts ...LockOption) (*Lock, error) {
	var w lockOptions
	if ms, ok := millis(wait); ok {
		w.setWait(ms)
	} else {
		w.err = invalidf("wait must be in [0, %v], got %v", MaxTTL, wait)
	}
	return m.acquire(nil, "LockWait", resource, ttl, &w, opts)
}

// LockContext acquires resource for ttl, waiting while it is held elsewhere until ctx ends:
// woken as soon as the holder releases it (or when its TTL runs out), it attempts again (see
// WithNotify). Without a Wait or NoWait option it waits until ctx's deadline (rounded up to
// whole milliseconds), or, without a deadline, until ctx is cancelled (at most MaxTTL, about
// 49.7 days, the longest wait the C ABI can express); with one, as that option says, and ctx
// still ends it early. The retry count of WithRetry does not apply.
//
// When ctx ends, the call returns at once if it waits, or within one round trip if an attempt
// is under way, and leaves no key behind on any node. A context that has already ended
// returns at once, without contacting any node. The arguments and other options are those of
// Acquire (including Fenced and AutoRenew); a nil ctx is ErrInvalidArgument.
//
// Errors: those of Acquire, and:
//   - ctx cancelled: ErrCancelled, which also matches ctx.Err() (errors.Is(err,
//     context.Canceled)) and the context's cause (context.WithCancelCause);
//   - ctx's deadline passed: ErrNotAcquired, which also matches context.DeadlineExceeded,
//     never ErrCancelled: a deadline ends the wait as Wait's time running out does. The
//     message is that of the last attempt when the library's wait ended with the deadline
//     (so it names each node's outcome; ErrUnavailable or ErrAuth when nodes were failing),
//     otherwise it says the deadline passed;
//   - Close called meanwhile: ErrClosed (Close cancels the LockContext calls in progress
//     rather than wait for them).
//
// In general, a failed LockContext whose ctx had ended by the time it returned wraps ctx's
// error; its Status is StatusCancelled only for a cancellation. Each call makes (and frees)
// options and a cancel handle of its own, about a microsecond next to the round trips.
func (m *Manager) LockContext(ctx context.Context, resource string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	if ctx == nil {
		if m == nil {
			return nil, nilReceiver("*Manager")
		}
		return nil, invalidf("LockContext: nil context")
	}
	return m.acquire(ctx, "LockContext", resource, ttl, nil, opts)
}

// AcquireMany acquires every resource of resources for ttl, or none of them: one Lock for the
// set, whose Unlock, Extend, Validity and auto-renewal act on every resource together
// (Resources lists them, in the order given; Resource is the first). Each node sets every
// resource's key or none, in one script, so callers naming overlapping sets in any order
// never deadlock; the lock is held when a quorum of nodes granted all of them, and a failed
// attempt takes its grants back from every node. A lock of any one of the resources (plain,
// reentrant, shared, or of another set) excludes the set, and the set excludes it. It costs
// one round trip per step, whatever the number of resources.
//
// Resources are named as for Acquire; there must be 1 to MaxResources of them, none named
// twice. Without a wait option it retries as configured by WithRetry; NoWait makes it a
// single attempt, and Wait(d) has it retry until d has passed. Waits for several resources
// always poll, after random pauses of up to the retry delay (a release is announced for one
// resource; WithNotify changes nothing here), and an exclusive locker that waits queues its
// intent on each resource, as for one (see WithShared). AutoRenew, OnLost and MaxExtensions
// work as with Acquire; Fenced, WithOwner and WithShared are ErrInvalidArgument: acquire
// such locks one resource at a time.
//
// Errors: those of Acquire, and ErrInvalidArgument for no resources, more than MaxResources,
// a resource named twice or longer than MaxResourceLen, or one of those options, before
// anything is sent. The names are copied into C memory made and freed for the call.
func (m *Manager) AcquireMany(resources []string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	return m.acquireMany(nil, "AcquireMany", resources, ttl, nil, opts)
}

// LockMany is AcquireMany, as Lock is Acquire: it acquires every resource of resources for
// ttl, or none, retrying as configured by WithRetry unless a NoWait or Wait option says
// otherwise. Arguments, options and errors are those of AcquireMany.
func (m *Manager) LockMany(resources []string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	return m.acquireMany(nil, "LockMany", resources, ttl, nil, opts)
}

// TryLockMany makes one attempt to acquire every resource of resources for ttl, or none, with
// no retry: AcquireMany with NoWait, as TryLock is for one resource. NoWait and Wait are
// ErrInvalidArgument here; other arguments, options and errors are those of AcquireMany.
func (m *Manager) TryLockMany(resources []string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	return m.acquireMany(nil, "TryLockMany", resources, ttl, &tryLockWait, opts)
}

// LockManyWait acquires every resource of resources for ttl, or none, retrying after random
// pauses of up to the retry delay while any of them is held elsewhere, until wait has passed:
// AcquireMany with Wait(wait), as LockWait is for one resource. wait must be in [0, MaxTTL]
// (0: a single attempt). NoWait and Wait are ErrInvalidArgument here; other arguments,
// options and errors are those of AcquireMany.
func (m *Manager) LockManyWait(resources []string, ttl, wait time.Duration, opts ...LockOption) (*Lock, error) {
	var w lockOptions
	if ms, ok := millis(wait); ok {
		w.setWait(ms)
	} else {
		w.err = invalidf("wait must be in [0, %v], got %v", MaxTTL, wait)
	}
	return m.acquireMany(nil, "LockManyWait", resources, ttl, &w, opts)
}

// LockManyContext acquires every resource of resources for ttl, or none, waiting while any of
// them is held elsewhere until ctx ends, as LockContext does for one resource (but polling,
// after random pauses of up to the retry delay, as every wait for several resources does).
// Without a Wait or NoWait option it waits until ctx's deadline, or until ctx is cancelled.
// A cancelled ctx ends the call at once (within one round trip if an attempt is under way)
// and leaves no key behind on any node. Arguments and options are those of AcquireMany; a
// nil ctx is ErrInvalidArgument. Errors: those of AcquireMany and of LockContext
// (ErrCancelled, ErrNotAcquired matching context.DeadlineExceeded, ErrClosed).
func (m *Manager) LockManyContext(ctx context.Context, resources []string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	if ctx == nil {
		if m == nil {
			return nil, nilReceiver("*Manager")
		}
		return nil, invalidf("LockManyContext: nil context")
	}
	return m.acquireMany(ctx, "LockManyContext", resources, ttl, nil, opts)
}
