package redlock

// #cgo CFLAGS: -I${SRCDIR}/../../include
// #include <stdlib.h>
// #include "redlock.h"
import "C"

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"
	"unsafe"
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
// The buffers are pooled (scratchPool), so the hot path (Acquire, Unlock) does no C.malloc or
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

	labelSet bool
	label    string

	prefixSet bool
	prefix    string

	tls tlsOptions // tls.go
}

// WithRetry sets the manager's retry policy, how Acquire and Lock retry when given neither
// NoWait nor Wait: up to count more attempts after the first, each after a random pause drawn
// uniformly from [0, delay]. The defaults are 3 and 200 ms. count must be ≥ 0 and delay ≥ 0
// (rounded up to whole milliseconds, at most MaxTTL); New returns ErrInvalidArgument
// otherwise. Waits (Wait, LockWait, LockContext) use the delay but not the count: for their
// random pauses with WithNotify(false), and, waiting by notification, for the pauses while
// notifications cannot be relied on; NoWait (and TryLock) use neither.
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
// every step, the same for every node (≥ 0; an extension still stops at the validity's end).
// A node timeout of 0 restores the default, a bound per kind of step: an acquisition waits a
// tenth of the lock's TTL (at least 10 ms, at most 1 s), an extension until the current
// validity ends, a release the stale limit (1 s); each adds 50 µs per key or semaphore slot
// beyond the first. A step returns at quorum, so these matter only while the nodes a quorum
// needs have not answered, and nodes far away count without tuning.
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

// WithMaxTTL sets the manager's maximum TTL (default DefaultMaxTTL, 60 s): Acquire, Lock,
// TryLock, LockWait and Extend refuse a longer TTL with ErrInvalidArgument (hold locks longer
// with auto-renewal), and it is how long a node that may have lost keys (it restarted, or its
// keyspace was flushed) stays in restart quarantine (see WithRestartQuarantine). It is rounded
// up to whole milliseconds and must be in [3 ms, MaxTTL]; New returns ErrInvalidArgument
// otherwise.
//
// Keep it short: it is how long such a node does not count toward a quorum. Every process that
// shares the nodes must use the same maximum TTL, or a smaller one than the processes that end
// quarantines (and write the nodes' markers): a marker written after a 5 s quarantine says
// nothing about locks of 60 s.
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
// On: a node that may have lost the lock keys it held does not count toward a quorum for the
// maximum TTL (WithMaxTTL), by when every key it lost has expired anyway. Each node holds a
// marker, the key "redlock-marker" (no TTL), with its run_id, written only while the node is
// trusted; every connection reads the node's run_id and marker, and every grant checks,
// atomically, that the marker exists. A brand-new cluster (no node has a marker, every node
// is younger than the maximum TTL and has answered) is trusted at once, so the first lock on
// freshly started servers succeeds. A node that restarted (its marker holds an earlier
// run_id, or the manager saw its run_id change) or lost its keyspace (no marker while the
// others have one, or FLUSHALL) is quarantined for the maximum TTL: its outcome is
// NodeQuarantined and its grants do not count; unlocks and renewals still go to it. With too
// many nodes in quarantine an acquisition fails with ErrUnavailable, whose message names each
// such node and why ("in restart quarantine for another 57.3 s (no marker: …)").
// Manager.NodeStates tells which nodes are in it, for how long and why (QuarantineReason).
// With ACLs, the user needs GET, SET and EXISTS on the key redlock-marker.
//
// Off: no marker is read or written and every node counts. Turn it off only for nodes that
// persist every write (appendonly yes, appendfsync always): a node restarted from such a file
// lost nothing, but the client cannot verify that it ran that way all along, so with
// quarantine on it is quarantined like any restarted node. (The Rust library then warns about
// nodes that do not persist every write, but through its log, which the C ABI does not
// forward: nothing is printed through this package.)
func WithRestartQuarantine(on bool) Option {
	return func(o *options) {
		o.quarantineSet, o.quarantine = true, on
	}
}

// WithLabel names this holder, for example "host:pid" or "billing-7:4242": the label is
// stored beside the token in the value of every plain lock the manager takes (Lock.Value), so
// that Manager.Holders (and `redlock inspect`) can say who holds a resource. A reentrant lock
// (WithOwner) is labelled by its owner id instead. The default is no label, and so is "".
//
// The label must be valid UTF-8 of at most MaxLabelLen bytes with no control characters
// (unicode.IsControl: no NUL, tab or newline); New returns ErrInvalidArgument otherwise.
// Anyone who can read the keys can read it: put no secrets in it.
func WithLabel(label string) Option {
	return func(o *options) {
		if err := checkLabel(label); err != nil {
			o.fail(err)
			return
		}
		o.labelSet, o.label = true, label
	}
}

// checkLabel applies the library's rules for a label, so that a bad one is refused before
// New makes anything (and a NUL byte never truncates it on its way to C).
func checkLabel(label string) error {
	if len(label) > MaxLabelLen {
		return invalidf("label is %d bytes, more than the maximum of %d", len(label), MaxLabelLen)
	}
	if !utf8.ValidString(label) {
		return invalidf("label is not valid UTF-8")
	}
	if strings.IndexFunc(label, unicode.IsControl) >= 0 {
		return invalidf("label must not contain control characters, got %q", label)
	}
	return nil
}

// WithKeyPrefix sets the prefix of every lock key: the key of a resource is the prefix
// followed by the resource's bytes. The default is DefaultKeyPrefix ("redlock:"). The prefix
// is 0 to MaxKeyPrefixLen arbitrary bytes; New returns ErrInvalidArgument for a longer one.
//
// The empty prefix names each key after the resource itself, as redsync and node-redlock do:
// a plain lock is then the same SET key value NX PX ttl and compare-and-delete as theirs, so
// services on either side of a migration exclude each other on the same resource names.
// Managers with different prefixes never exclude each other: every process that shares a lock
// must use the same prefix. A lock key may not fall in the library's own namespaces (keys
// starting with "redlock-fence:", and "redlock-marker"): acquiring such a resource, or asking
// who holds it, is ErrInvalidArgument.
func WithKeyPrefix(prefix string) Option {
	return func(o *options) {
		if len(prefix) > MaxKeyPrefixLen {
			o.fail(invalidf("key prefix is %d bytes, more than the maximum of %d", len(prefix), MaxKeyPrefixLen))
			return
		}
		o.prefixSet, o.prefix = true, prefix
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
	if o.labelSet {
		cl := C.CString(o.label) // checked by WithLabel: no NUL inside
		st := C.redlock_config_set_label(cfg, cl, s.err, errBufLen)
		C.free(unsafe.Pointer(cl))
		if st != C.REDLOCK_STATUS_OK {
			return nil, statusError(st, s.err)
		}
	}
	if o.prefixSet {
		var cp unsafe.Pointer // NULL with length 0: the empty prefix
		if o.prefix != "" {
			cp = C.CBytes([]byte(o.prefix))
		}
		st := C.redlock_config_set_key_prefix(cfg, (*C.uint8_t)(cp), C.size_t(len(o.prefix)), s.err, errBufLen)
		C.free(cp)
		if st != C.REDLOCK_STATUS_OK {
			return nil, statusError(st, s.err)
		}
	}
	if err := o.tls.apply(cfg, s); err != nil {
		return nil, err
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
	for i := range m.fixedOpts {
		wait, fenced, shared := fixedOptsKey(i)
		o, err := m.newAcquireOpts(wait, 0, fenced, false, shared)
		if err != nil {
			m.free()
			return nil, err
		}
		m.fixedOpts[i] = o
	}
	runtime.SetFinalizer(m, (*Manager).free)
	return m, nil
}

func newInternal(msg string) error {
	return &Error{Status: StatusInternal, Message: "internal error: " + msg}
}

// free releases the C manager once. It is Close's body and the finalizer; it never unlocks.
// It first cancels the LockContext calls in progress, then waits for every call.
func (m *Manager) free() {
	m.cancelMu.Lock()
	m.closing = true
	for c := range m.cancels {
		C.redlock_cancel_fire(c)
	}
	m.cancelMu.Unlock()
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
		owner := C.CBytes([]byte(o.owner))
		st := C.redlock_acquire_opts_set_owner(opts, (*C.uint8_t)(owner), C.size_t(len(o.owner)))
		C.free(owner)
		if st != C.REDLOCK_STATUS_OK { // checked by WithOwner already
			m.freeAcquireOpts(opts)
			return nil, &Error{Status: Status(st), Message: "setting the owner id failed"}
		}
	}
	if o.fair {
		st := C.redlock_acquire_opts_set_fair(opts, true)
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
	if o.ownerSet || o.fair {
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
	if o.shared || o.ownerSet || o.fenced || o.fair {
		what := "fenced"
		switch {
		case o.shared:
			what = "shared"
		case o.ownerSet:
			what = "reentrant (WithOwner)"
		case o.fair:
			what = "fair (WithFair)"
		}
		return nil, invalidf("%s takes exclusive, unfenced locks without an owner only; acquire %s locks one resource at a time", method, what)
	}
	if err := checkResources(resources); err != nil {
		return nil, err
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

// checkResources checks the resources of a *Many call before anything is copied or sent: 1
// to MaxResources of them, each at most MaxResourceLen bytes, none named twice. (Empty names
// are left to the library, as for one resource.)
func checkResources(resources []string) error {
	switch {
	case len(resources) == 0:
		return invalidf("no resources: name at least one")
	case len(resources) > MaxResources:
		return invalidf("%d resources, more than the maximum of %d per call", len(resources), MaxResources)
	}
	seen := make(map[string]int, len(resources))
	for i, r := range resources {
		if len(r) > MaxResourceLen {
			return invalidf("resource %d is %d bytes, more than the maximum of %d", i, len(r), MaxResourceLen)
		}
		if j, dup := seen[r]; dup {
			return invalidf("resource %q is named twice (at %d and %d)", r, j, i)
		}
		seen[r] = i
	}
	return nil
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
	if err := l.startRenewal(o.maxHold, o.maxExtensions, onLost); err != nil {
		// Acquired but not renewed: release it rather than hand back a lock the caller asked
		// to have renewed. Best effort: the error that matters is the renewal's.
		_ = l.Unlock()
		l.Free()
		return nil, err
	}
	return l, nil
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

// acquireError is the error of a failed acquisition: the library's, or for LockContext (ctx
// non-nil) contextError's.
func acquireError(ctx context.Context, st C.enum_redlock_status, s cScratch) error {
	if ctx != nil {
		return contextError(ctx, Status(st), C.GoString(s.err), time.Now())
	}
	return statusError(st, s.err)
}

// cNames is C memory holding the resource names of a redlock_acquire_many call, made for the
// call in one allocation: n pointers (NULL for an empty name), n lengths, then the bytes.
type cNames struct {
	p    unsafe.Pointer
	ptrs **C.uint8_t
	lens *C.size_t
	n    C.size_t
}

// newCNames copies names (1 to MaxResources of them, which every caller checks first) into C
// memory.
func newCNames(names []string) cNames {
	n := len(names)
	if n == 0 || n > MaxResources {
		panic("redlock: internal error: a resource count out of range reached newCNames")
	}
	total := 0
	for _, r := range names {
		total += len(r)
	}
	const ptrSize, lenSize = unsafe.Sizeof((*C.uint8_t)(nil)), unsafe.Sizeof(C.size_t(0))
	p := C.malloc(C.size_t(uintptr(n)*(ptrSize+lenSize) + uintptr(total))) // never nil (cgo aborts)
	ptrs := unsafe.Slice((**C.uint8_t)(p), n)
	lens := unsafe.Slice((*C.size_t)(unsafe.Add(p, uintptr(n)*ptrSize)), n)
	data := unsafe.Add(p, uintptr(n)*(ptrSize+lenSize))
	for i, r := range names {
		lens[i], ptrs[i] = C.size_t(len(r)), nil
		if len(r) > 0 {
			copy(unsafe.Slice((*byte)(data), len(r)), r)
			ptrs[i] = (*C.uint8_t)(data)
			data = unsafe.Add(data, len(r))
		}
	}
	return cNames{p: p, ptrs: &ptrs[0], lens: &lens[0], n: C.size_t(n)}
}

func (c cNames) free() { C.free(c.p) }

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
	m.cancelMu.Lock()
	if m.closing {
		m.cancelMu.Unlock()
		return nil, 0, ErrClosed
	}
	if m.cancels == nil {
		m.cancels = make(map[*C.redlock_cancel]struct{})
	}
	m.cancels[c] = struct{}{}
	m.cancelMu.Unlock()
	defer func() {
		m.cancelMu.Lock()
		delete(m.cancels, c)
		m.cancelMu.Unlock()
	}()

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
