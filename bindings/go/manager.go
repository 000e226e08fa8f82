package redlock

// #cgo CFLAGS: -I${SRCDIR}/../../include
// #include <stdlib.h>
// #include "redlock.h"
import "C"

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

const (
	// MaxTTL is the longest duration the C ABI can express, 2³²−1 milliseconds (about 49.7
	// days): the bound of every wait, delay and timeout, and the largest maximum TTL
	// WithMaxTTL accepts. A lock's TTL is bounded further by its manager's maximum TTL
	// (DefaultMaxTTL unless set with WithMaxTTL).
	MaxTTL = math.MaxUint32 * time.Millisecond
	// DefaultMaxTTL is a manager's maximum TTL unless WithMaxTTL sets another: the longest
	// TTL its locks may have (hold locks longer with auto-renewal), and how long a restarted
	// node stays in restart quarantine.
	DefaultMaxTTL = 60 * time.Second
	// MinTTL is the shortest TTL the library ever accepts: a TTL must exceed its drift
	// allowance, TTL × drift factor + 2 ms, which makes 3 ms the minimum at the default factor
	// (0.01) and more at larger factors. Shorter TTLs give ErrInvalidArgument.
	MinTTL = 3 * time.Millisecond
	// MaxResourceLen is the longest resource name accepted, in bytes.
	MaxResourceLen = 1024
)

// Compile-time checks that the constants above are the header's: each array length is
// negative, a compile error, unless both sides are equal.
var (
	_ [MaxResourceLen - C.REDLOCK_MAX_RESOURCE_LEN]struct{}
	_ [C.REDLOCK_MAX_RESOURCE_LEN - MaxResourceLen]struct{}
	_ [MaxTTL/time.Millisecond - C.REDLOCK_MAX_TTL_MS]struct{}
	_ [C.REDLOCK_MAX_TTL_MS - MaxTTL/time.Millisecond]struct{}
)

// errBufLen is the size of the C error buffer passed to every fallible call. Messages longer
// than this are truncated by the library (at a character boundary).
const errBufLen = 4096

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

// millis converts d to whole milliseconds for the C ABI, rounding up: a positive duration never
// becomes 0, and the library never gets less than was asked for. ok is false when d is
// negative or the result does not fit in a uint32.
func millis(d time.Duration) (ms uint32, ok bool) {
	if d < 0 {
		return 0, false
	}
	n := d / time.Millisecond
	if d%time.Millisecond != 0 {
		n++
	}
	if n > math.MaxUint32 {
		return 0, false
	}
	return uint32(n), true
}

// ttlMillis checks a TTL in Go (> 0, at most MaxTTL after rounding up) and converts it.
func ttlMillis(ttl time.Duration) (C.uint32_t, error) {
	if ttl <= 0 {
		return 0, invalidf("TTL must be > 0, got %v", ttl)
	}
	ms, ok := millis(ttl)
	if !ok {
		return 0, invalidf("TTL %v exceeds the maximum of %v", ttl, MaxTTL)
	}
	return C.uint32_t(ms), nil
}

// cScratch is C memory for one call: the error buffer, followed by a copy of the resource.
// Passing C memory (rather than Go memory) keeps every call clean under the cgo pointer
// checks, and nothing the library reads can be moved or collected during a call that blocks.
//
// The buffers are pooled (scratchPool), so the hot path (TryLock, Unlock) does no C.malloc or
// C.free: each buffer is made once, reused, and freed by a finalizer on its Go wrapper when
// the pool drops it at a garbage collection.
type cScratch struct {
	buf *cBuf
	err *C.char
	res *C.uint8_t // nil when the resource is empty
	n   C.size_t   // resource length
}

// scratchLen is the size of a pooled buffer: the error buffer and the longest resource.
const scratchLen = errBufLen + MaxResourceLen

// cBuf owns scratchLen bytes of C memory, freed by its finalizer.
type cBuf struct{ p unsafe.Pointer }

var scratchPool = sync.Pool{New: func() any {
	b := &cBuf{p: C.malloc(scratchLen)} // cgo's malloc never returns nil (it aborts)
	runtime.SetFinalizer(b, func(b *cBuf) { C.free(b.p) })
	return b
}}

// newScratch takes a buffer from the pool and copies resource (at most MaxResourceLen bytes,
// which every caller checks first) after the error buffer.
func newScratch(resource string) cScratch {
	if len(resource) > MaxResourceLen {
		panic("redlock: internal error: resource longer than MaxResourceLen reached newScratch")
	}
	b := scratchPool.Get().(*cBuf)
	s := cScratch{buf: b, err: (*C.char)(b.p), n: C.size_t(len(resource))}
	*s.err = 0
	if len(resource) > 0 {
		p := unsafe.Add(b.p, errBufLen)
		copy(unsafe.Slice((*byte)(p), len(resource)), resource)
		s.res = (*C.uint8_t)(p)
	}
	return s
}

// free returns the buffer to the pool.
func (s cScratch) free() { scratchPool.Put(s.buf) }

// checkResource rejects names too long for the library before copying them. Empty names are
// left to the library, which rejects them with its own message.
func checkResource(resource string) error {
	if len(resource) > MaxResourceLen {
		return invalidf("resource is %d bytes, more than the maximum of %d", len(resource), MaxResourceLen)
	}
	return nil
}

// Option configures a Manager; pass options to New.
type Option func(*options)

type options struct {
	err error

	retrySet   bool
	retryCount uint32
	retryDelay uint32

	driftSet bool
	drift    float64

	timeoutsSet bool
	connect     uint32
	node        uint32

	maxTTLSet bool
	maxTTL    uint32

	quarantineSet bool
	quarantine    bool
}

// WithRetry sets how Lock retries: up to count more attempts after the first, each after a
// random pause drawn uniformly from [0, delay]. The defaults are 3 and 200 ms. count must be
// ≥ 0 and delay ≥ 0 (rounded up to whole milliseconds, at most MaxTTL); New returns
// ErrInvalidArgument otherwise. LockWait uses the delay but not the count; TryLock uses
// neither.
func WithRetry(count int, delay time.Duration) Option {
	return func(o *options) {
		if count < 0 || uint64(count) > math.MaxUint32 {
			o.fail(invalidf("retry count must be in [0, %d], got %d", uint32(math.MaxUint32), count))
			return
		}
		ms, ok := millis(delay)
		if !ok {
			o.fail(invalidf("retry delay must be in [0, %v], got %v", MaxTTL, delay))
			return
		}
		o.retrySet, o.retryCount, o.retryDelay = true, uint32(count), ms
	}
}

// WithDriftFactor sets the clock-drift factor: a lock's validity is shortened by
// TTL × factor + 2 ms. It must be finite and in [0, 1); the default is 0.01. The library
// checks the value; New returns ErrInvalidArgument for a bad one.
func WithDriftFactor(factor float64) Option {
	return func(o *options) {
		o.driftSet, o.drift = true, factor
	}
}

// WithTimeouts sets the connect timeout (> 0; default 250 ms) and the per-node I/O timeout of
// every step (≥ 0). A node timeout of 0 restores the default, derived from each lock's TTL
// (TTL / 200, clamped to [10 ms, 50 ms]) — short, so raise it on slow or busy networks.
// Durations are rounded up to whole milliseconds and must not exceed MaxTTL; New returns
// ErrInvalidArgument otherwise.
func WithTimeouts(connect, node time.Duration) Option {
	return func(o *options) {
		c, ok := millis(connect)
		if !ok || c == 0 {
			o.fail(invalidf("connect timeout must be in (0, %v], got %v", MaxTTL, connect))
			return
		}
		n, ok := millis(node)
		if !ok {
			o.fail(invalidf("node timeout must be in [0, %v], got %v", MaxTTL, node))
			return
		}
		o.timeoutsSet, o.connect, o.node = true, c, n
	}
}

// WithMaxTTL sets the manager's maximum TTL (default DefaultMaxTTL, 60 s): Lock, TryLock,
// LockWait and Extend refuse a longer TTL with ErrInvalidArgument (hold locks longer with
// auto-renewal), and a node that restarted less than this long ago is in restart quarantine
// (see WithRestartQuarantine). It is rounded up to whole milliseconds and must be in
// [3 ms, MaxTTL]; New returns ErrInvalidArgument otherwise.
//
// Keep it short: it is how long a restarted node does not count toward a quorum.
func WithMaxTTL(d time.Duration) Option {
	return func(o *options) {
		ms, ok := millis(d)
		if !ok || d <= 0 {
			o.fail(invalidf("maximum TTL must be in [3ms, %v], got %v", MaxTTL, d))
			return
		}
		o.maxTTLSet, o.maxTTL = true, ms
	}
}

// WithRestartQuarantine turns restart quarantine on (the default) or off.
//
// On: the manager reads each node's uptime (INFO server) on every connection, and a node up
// for less than the maximum TTL (WithMaxTTL) — one that may have restarted without the keys
// it held — does not count toward a quorum until its uptime passes the maximum TTL (plus up
// to a second, as uptimes are whole seconds). Its grants are released at once and its
// outcome is NodeQuarantined; unlocks and renewals still go to it. With too many nodes in
// quarantine an acquisition fails with ErrUnavailable, whose message says "in restart
// quarantine". Manager.NodeStates tells which nodes are in it and for how long.
//
// Turn it off only for nodes that persist every write (appendonly yes, appendfsync always)
// or that were just started empty, as in tests. (The Rust library then warns about nodes that
// do not persist every write, but through its log, which the C ABI does not forward: nothing
// is printed through this package.)
func WithRestartQuarantine(on bool) Option {
	return func(o *options) {
		o.quarantineSet, o.quarantine = true, on
	}
}

func (o *options) fail(err error) {
	if o.err == nil {
		o.err = err
	}
}

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

	// afterAcquire, when set (by the package's tests only), runs between a successful
	// acquisition and the start of auto-renewal requested by the AutoRenew option.
	afterAcquire func(*Lock)
}

// New creates a manager for the given nodes, each "redis://[user:password@]host[:port][/db]"
// (port 6379 by default) or "host:port". It checks every option and URL and resolves every
// host name, but makes no connection until the first lock.
//
// Errors: ErrInvalidArgument for no nodes, a malformed URL (the message never contains the
// password), a node listed twice, a host that does not resolve or a bad option.
func New(nodes []string, opts ...Option) (*Manager, error) {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.err != nil {
		return nil, o.err
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
		cu := C.CString(u)
		st := C.redlock_config_add_node(cfg, cu, s.err, errBufLen)
		C.free(unsafe.Pointer(cu))
		if st != C.REDLOCK_STATUS_OK {
			return nil, statusError(st, s.err)
		}
	}
	if o.retrySet {
		st := C.redlock_config_set_retry(cfg, C.uint32_t(o.retryCount), C.uint32_t(o.retryDelay), s.err, errBufLen)
		if st != C.REDLOCK_STATUS_OK {
			return nil, statusError(st, s.err)
		}
	}
	if o.driftSet {
		st := C.redlock_config_set_drift_factor(cfg, C.double(o.drift), s.err, errBufLen)
		if st != C.REDLOCK_STATUS_OK {
			return nil, statusError(st, s.err)
		}
	}
	if o.timeoutsSet {
		st := C.redlock_config_set_timeouts(cfg, C.uint32_t(o.connect), C.uint32_t(o.node), s.err, errBufLen)
		if st != C.REDLOCK_STATUS_OK {
			return nil, statusError(st, s.err)
		}
	}
	if o.maxTTLSet {
		st := C.redlock_config_set_max_ttl(cfg, C.uint32_t(o.maxTTL), s.err, errBufLen)
		if st != C.REDLOCK_STATUS_OK {
			return nil, statusError(st, s.err)
		}
	}
	if o.quarantineSet {
		st := C.redlock_config_set_restart_quarantine(cfg, C.bool(o.quarantine), s.err, errBufLen)
		if st != C.REDLOCK_STATUS_OK {
			return nil, statusError(st, s.err)
		}
	}
	var ptr *C.redlock_manager
	st := C.redlock_manager_new(cfg, &ptr, s.err, errBufLen)
	if st != C.REDLOCK_STATUS_OK {
		return nil, statusError(st, s.err)
	}
	m := &Manager{
		ptr:    ptr,
		nodes:  int(C.redlock_manager_node_count(ptr)),
		quorum: int(C.redlock_manager_quorum(ptr)),
	}
	runtime.SetFinalizer(m, (*Manager).free)
	return m, nil
}

func newInternal(msg string) error {
	return &Error{Status: StatusInternal, Message: "internal error: " + msg}
}

// free releases the C manager once. It is Close's body and the finalizer; it never unlocks.
func (m *Manager) free() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ptr != nil {
		C.redlock_manager_free(m.ptr)
		m.ptr = nil
		managersFreed.Add(1)
	}
}

// Close frees the manager and its idle connections. It waits for calls in progress on this
// manager (a Lock may block for its retries) and makes later calls return ErrClosed. It never
// unlocks anything: locks made by this manager stay usable and can still be unlocked,
// extended and freed. Close is idempotent and always returns nil.
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

type acquireMode int

const (
	modeRetry acquireMode = iota
	modeOnce
	modeWait
)

func (m *Manager) acquire(mode acquireMode, resource string, ttl, wait time.Duration, opts []LockOption) (*Lock, error) {
	if m == nil {
		return nil, nilReceiver("*Manager")
	}
	o, err := lockOptionsOf(opts)
	if err != nil {
		return nil, err
	}
	ttlMs, err := ttlMillis(ttl)
	if err != nil {
		return nil, err
	}
	var flags, waitMs C.uint32_t
	switch mode {
	case modeOnce:
		flags = C.REDLOCK_LOCK_ONCE
	case modeWait:
		ms, ok := millis(wait)
		if !ok {
			return nil, invalidf("wait must be in [0, %v], got %v", MaxTTL, wait)
		}
		flags, waitMs = C.REDLOCK_LOCK_WAIT, C.uint32_t(ms)
	}
	if o.fenced {
		flags |= C.REDLOCK_LOCK_FENCED
	}
	if err := checkResource(resource); err != nil {
		return nil, err
	}

	l, err := m.lockOpts(resource, ttlMs, flags, waitMs)
	if err != nil {
		return nil, err
	}
	if !o.renew {
		return l, nil
	}
	if m.afterAcquire != nil {
		m.afterAcquire(l)
	}
	var onLost func()
	if f := o.onLost; f != nil {
		// A reference to l: dropped when renewal stops (see lostState), so that it keeps l
		// reachable only while the lock is renewed.
		onLost = func() { f(l) }
	}
	if err := l.startRenewal(o.maxHold, o.maxExtensions, onLost); err != nil {
		// Acquired but not renewed: release it rather than hand back a lock the caller asked
		// to have renewed. Best effort: the error that matters is the renewal's.
		_ = l.Unlock()
		l.Free()
		return nil, err
	}
	return l, nil
}

// lockOpts makes the one C call of an acquisition, under the manager's read lock, and wraps
// the lease.
func (m *Manager) lockOpts(resource string, ttlMs, flags, waitMs C.uint32_t) (*Lock, error) {
	s := newScratch(resource)
	defer s.free()
	out, st, ok := m.lockOptsCall(s, ttlMs, flags, waitMs)
	if !ok {
		return nil, ErrClosed
	}
	if st != C.REDLOCK_STATUS_OK {
		return nil, statusError(st, s.err)
	}
	return newLock(out, resource, s), nil
}

// lockOptsCall is the C call; ok is false when the manager is closed.
func (m *Manager) lockOptsCall(s cScratch, ttlMs, flags, waitMs C.uint32_t) (out *C.redlock_lease, st C.enum_redlock_status, ok bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.ptr == nil {
		return nil, 0, false
	}
	st = C.redlock_lock_opts(m.ptr, s.res, s.n, ttlMs, flags, waitMs, &out, s.err, errBufLen)
	runtime.KeepAlive(m)
	return out, st, true
}

// Lock acquires resource for ttl, retrying as configured by WithRetry (by default up to 3
// more attempts, each after a random pause of up to 200 ms). It blocks for a bounded time,
// never forever.
//
// The resource is 1 to MaxResourceLen arbitrary bytes; the lock is the Redis key "redlock:"
// followed by them. The TTL must be > 0 and at most the manager's maximum TTL (WithMaxTTL;
// DefaultMaxTTL, 60 s, by default); it is rounded up to whole milliseconds and must exceed
// its drift allowance (so at least MinTTL). Hold a lock longer with auto-renewal.
//
// Options: Fenced gives the lock a fencing token (FencingToken); AutoRenew (with OnLost and
// MaxExtensions) starts auto-renewal as soon as the lock is acquired. Without options this is
// a plain lock.
//
// Errors: ErrNotAcquired (held elsewhere), ErrUnavailable (too many nodes failed or in
// restart quarantine for a quorum to be possible; the message names each node's outcome),
// ErrInvalidArgument (bad TTL, resource or option), ErrInternal, ErrClosed; with AutoRenew,
// the errors of starting renewal, in which case the lock has been unlocked and freed. The
// returned Lock must eventually be unlocked (or left to expire) and freed (or left to the
// garbage collector).
func (m *Manager) Lock(resource string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	return m.acquire(modeRetry, resource, ttl, 0, opts)
}

// TryLock makes one attempt to acquire resource for ttl, with no retry. Arguments, options
// and errors are those of Lock.
func (m *Manager) TryLock(resource string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	return m.acquire(modeOnce, resource, ttl, 0, opts)
}

// LockWait acquires resource for ttl, retrying after random pauses (up to the retry delay set
// by WithRetry) until wait has passed; no attempt starts after that, and the retry count does
// not apply. wait must be ≥ 0 (0 means a single attempt) and at most MaxTTL; it is rounded up
// to whole milliseconds. Other arguments, options and errors are those of Lock.
func (m *Manager) LockWait(resource string, ttl, wait time.Duration, opts ...LockOption) (*Lock, error) {
	return m.acquire(modeWait, resource, ttl, wait, opts)
}
