package redlock

// #include <stdlib.h>
// #include "redlock.h"
import "C"

import (
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"
	"unsafe"
)

// NodeOutcome is what happened on one node while a lock was acquired (see Lock.NodeOutcomes).
// The numbers are those of the C ABI's redlock_node_outcome and never change.
type NodeOutcome int32

// The per-node outcomes of an acquisition.
const (
	// NodeSuccess: the node granted the lock.
	NodeSuccess NodeOutcome = C.REDLOCK_NODE_SUCCESS
	// NodeRejected: the node answered that the key is held by another owner.
	NodeRejected NodeOutcome = C.REDLOCK_NODE_REJECTED
	// NodePending: the request was sent, but the quorum was reached before this node
	// answered.
	NodePending NodeOutcome = C.REDLOCK_NODE_PENDING
	// NodeTimeout: no answer within the per-node timeout.
	NodeTimeout NodeOutcome = C.REDLOCK_NODE_TIMEOUT
	// NodeUnreachable: connection refused, reset or closed.
	NodeUnreachable NodeOutcome = C.REDLOCK_NODE_UNREACHABLE
	// NodeBackoff: not contacted, because of a reconnect backoff after a recent failure.
	NodeBackoff NodeOutcome = C.REDLOCK_NODE_BACKOFF
	// NodeServerError: the node answered with an error (-ERR, -WRONGPASS, …).
	NodeServerError NodeOutcome = C.REDLOCK_NODE_SERVER_ERROR
	// NodeProtocol: the node's answer was not valid RESP or not the expected reply.
	NodeProtocol NodeOutcome = C.REDLOCK_NODE_PROTOCOL
	// NodeQuarantined: not counted, because the node may have lost lock keys (it restarted,
	// or its keyspace was flushed) less than the maximum TTL ago: restart quarantine, see
	// WithRestartQuarantine; Manager.NodeStates says why. A grant it made was released.
	NodeQuarantined NodeOutcome = C.REDLOCK_NODE_QUARANTINED
	// NodeDuplicate: not counted, because the node is the same server (the same run_id) as a
	// lower-indexed node of the list, reached through another address.
	NodeDuplicate NodeOutcome = C.REDLOCK_NODE_DUPLICATE
	// NodeTLS: the TLS session with a rediss:// node failed: its certificate is not trusted
	// (another CA, expired, another name), it refused this client's or wanted one this client
	// lacks (mutual TLS), or it does not speak TLS. The error's message says which.
	NodeTLS NodeOutcome = C.REDLOCK_NODE_TLS
	// NodeSentinel: a failover group's (redis+sentinel://) master could not be found or
	// confirmed: no sentinel answered, none knows the service, they disagree, or the server
	// they name is not a master. The error's message says which.
	NodeSentinel NodeOutcome = C.REDLOCK_NODE_SENTINEL
	// NodeUnacknowledged: a failover group granted, but fewer of its replicas acknowledged the
	// grant in time than WithReplicaAcks asks for: it does not count (and was released).
	NodeUnacknowledged NodeOutcome = C.REDLOCK_NODE_UNACKNOWLEDGED
)

// String returns a short name: "success", "rejected", "pending", "timeout", "unreachable",
// "backoff", "server error", "protocol error", "quarantined", "duplicate", "tls",
// "sentinel", "unacknowledged", or
// "NodeOutcome(n)" for other numbers.
func (o NodeOutcome) String() string {
	switch o {
	case NodeSuccess:
		return "success"
	case NodeRejected:
		return "rejected"
	case NodePending:
		return "pending"
	case NodeTimeout:
		return "timeout"
	case NodeUnreachable:
		return "unreachable"
	case NodeBackoff:
		return "backoff"
	case NodeServerError:
		return "server error"
	case NodeProtocol:
		return "protocol error"
	case NodeQuarantined:
		return "quarantined"
	case NodeDuplicate:
		return "duplicate"
	case NodeTLS:
		return "tls"
	case NodeSentinel:
		return "sentinel"
	case NodeUnacknowledged:
		return "unacknowledged"
	}
	return "NodeOutcome(" + strconv.Itoa(int(o)) + ")"
}

// Lock is a lock acquired by a Manager (a lease in the C ABI). It is safe for concurrent use.
//
// Unlock releases it on the nodes; Free releases its memory. They are independent: Free never
// unlocks (an unreleased lock expires after its TTL), and Unlock does not free. A Lock that is
// garbage collected without Free is freed by a finalizer — again without unlocking. A Lock
// stays usable after its Manager is closed.
//
// Extend pushes the expiry back by hand; auto-renewal (the AutoRenew option, or the AutoRenew
// method) has the manager's renewal thread do it, and reports through IsLost, Lost, WaitLost,
// LostReason and a callback if the lock is lost. A lock taken with the Fenced option carries
// a FencingToken. A Lock taken by the *Many methods holds several resources, all of them
// together (Resources lists them); one taken with WithShared is shared (IsShared); one taken
// with WithFair is fair (IsFair), with a Ticket if it queued; one taken by a Semaphore's
// methods is one permit of the semaphore (Permit).
type Lock struct {
	// mu guards ptr: read-locked for every C call on the lease, write-locked by Free, so the
	// lease is never freed while a call on it is running.
	mu  sync.RWMutex
	ptr *C.redlock_lease

	// Auto-renewal: the state the lost callback reaches, and (once renewal was started) the
	// C memory holding its cgo.Handle, passed to the library as userdata. renewMu serialises
	// the calls that start or stop renewal (AutoRenew, StopRenewal, Unlock), each with its
	// bookkeeping in lost, under mu's read lock; userdata is written under both, and released
	// by free under mu's write lock.
	lost     *lostState
	renewMu  sync.Mutex
	userdata unsafe.Pointer

	// Immutable facts copied out of the lease when it was acquired; valid after Free.
	// resources is nil for a lock of one resource (resource); a lock of several (the *Many
	// methods) has them all there, resource being the first. A semaphore's permit has
	// permit set, with its slot and the semaphore's count, resource being its name.
	token     string
	value     string
	resource  string
	resources []string
	shared    bool
	fair      bool
	hasTicket bool
	ticket    uint64
	permit    bool
	slot      uint32
	permits   uint32
	granted   int
	outcomes  []NodeOutcome
	fence     uint64

	// What TTL and LostReason answered when the lease was freed (guarded by mu).
	freedTTL    time.Duration
	freedReason string
}

// newLock wraps a lease just acquired for resource (the bytes the lease holds, so they are
// not copied back out of C), or for resources (nil for one resource; resource is then the
// first, and the slice is the lock's own). s is the acquisition's scratch buffer, no longer
// needed for an error message: the node outcomes are read into it.
func newLock(p *C.redlock_lease, resource string, resources []string, s cScratch) *Lock {
	l := &Lock{
		ptr:       p,
		lost:      newLostState(),
		token:     C.GoString(C.redlock_lease_token(p)),
		value:     C.GoString(C.redlock_lease_value(p)),
		resource:  resource,
		resources: resources,
		shared:    bool(C.redlock_lease_is_shared(p)),
		granted:   int(C.redlock_lease_granted(p)),
		fence:     uint64(C.redlock_lease_fencing_token(p)),
	}
	const capacity = scratchLen / C.sizeof_enum_redlock_node_outcome
	buf := (*C.enum_redlock_node_outcome)(s.buf.p)
	count := C.redlock_lease_node_outcomes(p, buf, capacity)
	if count > capacity { // more nodes than anyone runs: a buffer of their own
		big := C.malloc(count * C.sizeof_enum_redlock_node_outcome)
		defer C.free(big)
		buf = (*C.enum_redlock_node_outcome)(big)
		count = min(count, C.redlock_lease_node_outcomes(p, buf, count))
	}
	l.outcomes = make([]NodeOutcome, count)
	for i, o := range unsafe.Slice(buf, count) {
		l.outcomes[i] = NodeOutcome(o)
	}
	runtime.SetFinalizer(l, (*Lock).free)
	return l
}

// free releases the C lease once. It is Free's body and the finalizer; it never unlocks.
// redlock_lease_free stops auto-renewal and waits for a lost callback in flight; after it no
// callback runs, so the callback's handle can go too.
func (l *Lock) free() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ptr != nil {
		l.freedTTL = time.Duration(C.redlock_lease_ttl_ms(l.ptr)) * time.Millisecond
		l.freedReason = lostReason(l.ptr)
		C.redlock_lease_free(l.ptr)
		l.ptr = nil
		l.releaseRenewal()
		l.lost.stopped()
		locksFreed.Add(1)
	}
}

// Free releases the Lock's memory without unlocking it: if it was not unlocked, the lock
// expires on the nodes after its TTL. It stops auto-renewal. It waits for calls in progress
// on this Lock; afterwards Unlock and Extend return ErrClosed, Validity returns 0, Renewing
// false, and Token, Value, Resource, Granted, NodeOutcomes, FencingToken, TTL, IsLost and
// LostReason still answer (with what they said at Free). Free is idempotent.
func (l *Lock) Free() {
	if l == nil {
		return
	}
	l.free()
	runtime.SetFinalizer(l, nil)
}

// Unlock releases the lock on every node (owner-checked: another owner's key is never
// deleted). It stops auto-renewal first, waiting for a renewal in flight. From this call on,
// Validity returns 0, whatever the outcome.
//
// Errors: ErrNotHeld (the lock had expired, was already unlocked, or a quorum did not hold
// it), ErrUnavailable (too many nodes failed to tell; ErrAuth when refused credentials made
// the difference), ErrInternal, ErrClosed (after Free).
func (l *Lock) Unlock() error {
	if l == nil {
		return nilReceiver("*Lock")
	}
	s := newScratch("")
	defer s.free()
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.ptr == nil {
		return ErrClosed
	}
	l.renewMu.Lock() // the renewal bookkeeping follows the library's order (see startRenewal)
	defer l.renewMu.Unlock()
	st := C.redlock_unlock(l.ptr, s.err, errBufLen)
	runtime.KeepAlive(l)
	l.lost.stopped() // renewal stopped first, whatever the outcome
	if st != C.REDLOCK_STATUS_OK {
		return statusError(st, s.err)
	}
	return nil
}

// Extend sets the lock to expire ttl from now, if a quorum confirms before the current
// validity ends. It never recreates an expired key. The TTL follows the rules of
// Manager.Acquire (at most the manager's maximum TTL).
//
// Errors: ErrNotHeld (the validity had already ended, the lock was unlocked, or a quorum did
// not confirm in time), ErrUnavailable (or ErrAuth), ErrInvalidArgument (TTL), ErrInternal, ErrClosed
// (after Free). After a failed Extend the validity is never longer than before.
func (l *Lock) Extend(ttl time.Duration) error {
	if l == nil {
		return nilReceiver("*Lock")
	}
	ms, err := ttlMillis(ttl)
	if err != nil {
		return err
	}
	s := newScratch("")
	defer s.free()
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.ptr == nil {
		return ErrClosed
	}
	st := C.redlock_extend(l.ptr, ms, s.err, errBufLen)
	runtime.KeepAlive(l)
	if st != C.REDLOCK_STATUS_OK {
		return statusError(st, s.err)
	}
	return nil
}

// Validity returns how much longer the holder may assume it holds the lock, in whole
// milliseconds (rounded down): TTL minus the time acquisition (or the last Extend) took minus
// the drift allowance, counted down since. It is 0 once the lock expired, after Unlock, and
// after Free.
func (l *Lock) Validity() time.Duration {
	if l == nil {
		return 0
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.ptr == nil {
		return 0
	}
	ms := C.redlock_lease_validity_ms(l.ptr)
	runtime.KeepAlive(l)
	return time.Duration(ms) * time.Millisecond
}

// Valid reports whether the remaining validity is positive (false after Unlock and Free).
func (l *Lock) Valid() bool {
	if l == nil {
		return false
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.ptr == nil {
		return false
	}
	ok := C.redlock_lease_is_valid(l.ptr)
	runtime.KeepAlive(l)
	return bool(ok)
}

// Token returns the lock's random token, 40 hex characters, unique to this lock. It is not
// what the nodes store under the lock's key: that is Value, which for a plain lock begins
// with the token ("<token>.<unix ms>[ <label>]"). For a reentrant lock, a shared one and a
// semaphore's permit, the token names the lock's hold ("hold:<token>"), and Value is the
// token itself.
func (l *Lock) Token() string {
	if l == nil {
		return ""
	}
	return l.token
}

// Value returns what the lock stores under its key on the nodes (not Token, which it begins
// with), the proof of ownership every Unlock and Extend compares. For a plain lock it is the
// token, a dot, the holder's wall-clock Unix time in milliseconds when the attempt started,
// and, if the manager has a label (WithLabel), a space and the label:
// "<40 hex>.<unix ms>[ <label>]"; a lock of several resources stores it under each of their
// keys. For a reentrant lock (WithOwner), a shared one (WithShared) and a semaphore's permit it
// is the token, which names the lock's hold in the key's hash ("hold:<token>"). It is the ID
// that Manager.Holders reports for the holder of a plain or reentrant lock. It still answers
// after Free.
func (l *Lock) Value() string {
	if l == nil {
		return ""
	}
	return l.value
}

// Resource returns the resource name, as given to Lock; for a lock of several resources
// (LockMany and the other *Many methods), the first of them; for a semaphore's permit, the
// semaphore's name.
func (l *Lock) Resource() string {
	if l == nil {
		return ""
	}
	return l.resource
}

// Resources returns every resource the lock holds, in the order given: the one resource of a
// lock taken by Acquire, Lock, TryLock, LockWait or LockContext, the whole set of one taken by
// their *Many counterparts. The slice is a copy; it still answers after Free.
func (l *Lock) Resources() []string {
	switch {
	case l == nil:
		return nil
	case l.resources == nil:
		return []string{l.resource}
	}
	return slices.Clone(l.resources)
}

// IsShared reports whether the lock is shared (taken with WithShared): held beside other
// shared holders of the resource, and excluding exclusive ones. It still answers after Free.
func (l *Lock) IsShared() bool {
	return l != nil && l.shared
}

// IsFair reports whether the lock is fair (taken with WithFair). It still answers after Free.
func (l *Lock) IsFair() bool {
	return l != nil && l.fair
}

// Ticket returns a fair lock's ticket (redlock_lease_ticket): for a lock taken with WithFair
// that queued, ok is true and ticket ordered it among the resource's waiters (lower tickets are
// granted first; a waiter that queued after another had finished queueing has a larger one).
// For a fair lock granted at once with nobody queued, and for any other lock, ok is false and
// ticket is 0. It still answers after Free.
func (l *Lock) Ticket() (ticket uint64, ok bool) {
	if l == nil || !l.hasTicket {
		return 0, false
	}
	return l.ticket, true
}

// Permit tells which permit of a semaphore the lock is: for a Lock taken by a Semaphore's
// methods (Acquire, TryAcquire, AcquireWait, AcquireContext), ok is true, slot is the slot it
// holds (0 to permits−1; no two valid permits of one semaphore hold the same slot at once) and
// permits is the semaphore's count. For any other lock ok is false and slot and permits are 0.
// It still answers after Free.
func (l *Lock) Permit() (slot, permits uint32, ok bool) {
	if l == nil || !l.permit {
		return 0, 0, false
	}
	return l.slot, l.permits, true
}

// Granted returns how many nodes had granted the lock when the acquisition was decided (at
// least the quorum). Nodes that answered after the decision count as NodePending.
func (l *Lock) Granted() int {
	if l == nil {
		return 0
	}
	return l.granted
}

// NodeOutcomes returns what happened on each node during the acquisition, in the order the
// nodes were given to New. The slice is a copy.
func (l *Lock) NodeOutcomes() []NodeOutcome {
	if l == nil {
		return nil
	}
	return append([]NodeOutcome(nil), l.outcomes...)
}

// FencingToken returns the lock's fencing token: for a lock taken with the Fenced option, a
// number strictly greater than that of every earlier fenced grant of the resource (exact over
// the whole uint64 range; a counter at its top refuses the next grant with ErrInternal rather
// than repeat a token); 0 for a plain lock. It never changes (renewal and Extend keep it) and still
// answers after Free.
func (l *Lock) FencingToken() uint64 {
	if l == nil {
		return 0
	}
	return l.fence
}

// TTL returns the TTL of the lock's last successful acquisition or extension (by Extend or
// auto-renewal), in whole milliseconds. After Free it returns the value at Free.
func (l *Lock) TTL() time.Duration {
	if l == nil {
		return 0
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.ptr == nil {
		return l.freedTTL
	}
	ms := C.redlock_lease_ttl_ms(l.ptr)
	runtime.KeepAlive(l)
	return time.Duration(ms) * time.Millisecond
}

// Renewing reports whether auto-renewal is on: started, and not yet stopped by Unlock,
// StopRenewal, Free, a loss or a bound. False after Free. It does not wait for an Unlock,
// Extend or renewal round in progress on the lock.
func (l *Lock) Renewing() bool {
	if l == nil {
		return false
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.ptr == nil {
		return false
	}
	on := C.redlock_lease_is_renewing(l.ptr)
	runtime.KeepAlive(l)
	return bool(on)
}

// LostReason says why auto-renewal reported the lock lost, for example "maximum hold time
// reached after 3000 ms" or "renewal failed: 1/5 extended (quorum 3); node 2 (…): connection
// refused; …"; it is empty while the lock is not lost. After Free it returns the reason known
// at Free.
func (l *Lock) LostReason() string {
	if l == nil {
		return ""
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.ptr == nil {
		return l.freedReason
	}
	r := lostReason(l.ptr)
	runtime.KeepAlive(l)
	return r
}

// lostReason reads a live lease's lost reason ("" when not lost) through a pooled buffer,
// or a larger one for a reason that does not fit (redlock_lease_lost_reason is
// snprintf-style: it returns the reason's full length, 0 when not lost).
func lostReason(p *C.redlock_lease) string {
	if !C.redlock_lease_is_lost(p) { // never waits: the common case takes no buffer
		return ""
	}
	s := newScratch("")
	defer s.free()
	return snprintfString(s, func(buf *C.char, n C.size_t) C.size_t {
		return C.redlock_lease_lost_reason(p, buf, n)
	})
}

// String describes the lock for logs: its resource, the start of its token and its validity.
func (l *Lock) String() string {
	if l == nil {
		return "redlock.Lock(nil)"
	}
	tok := l.token
	if len(tok) > 8 {
		tok = tok[:8] + "…"
	}
	what := fmt.Sprintf("resource: %q", l.resource)
	if l.resources != nil {
		what = fmt.Sprintf("resources: %q", l.resources)
	}
	if l.shared {
		what += ", shared"
	}
	if l.fair {
		what += ", fair"
		if l.hasTicket {
			what += fmt.Sprintf(", ticket: %d", l.ticket)
		}
	}
	if l.permit {
		what = fmt.Sprintf("semaphore: %q, permit: slot %d of %d", l.resource, l.slot, l.permits)
	}
	if l.fence != 0 {
		return fmt.Sprintf("redlock.Lock{%s, token: %s, fencing token: %d, validity: %v}",
			what, tok, l.fence, l.Validity())
	}
	return fmt.Sprintf("redlock.Lock{%s, token: %s, validity: %v}", what, tok, l.Validity())
}
