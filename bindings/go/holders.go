package redlock

// #include <stdlib.h>
// #include "redlock.h"
import "C"

import (
	"bytes"
	"math"
	"runtime"
	"strconv"
	"time"
	"unsafe"
)

// HoldState is what one node has under a resource's key (NodeHold.State). The numbers are
// those of the C ABI's redlock_hold_state and never change.
type HoldState int32

// The states of a node's key.
const (
	// HoldFree: the node has no key for the resource.
	HoldFree HoldState = C.REDLOCK_HOLD_FREE
	// HoldHeld: the node has a key for the resource, whoever's it is (NodeHold.Holder says).
	HoldHeld HoldState = C.REDLOCK_HOLD_HELD
	// HoldFailed: the node could not be asked (down, timed out, an error).
	HoldFailed HoldState = C.REDLOCK_HOLD_FAILED
)

// String returns "free", "held", "failed", or "HoldState(n)" for other numbers.
func (s HoldState) String() string {
	switch s {
	case HoldFree:
		return "free"
	case HoldHeld:
		return "held"
	case HoldFailed:
		return "failed"
	}
	return "HoldState(" + strconv.Itoa(int(s)) + ")"
}

// HolderKind is what kind of key holds a resource (Holder.Kind). The numbers are those of the
// C ABI's redlock_holder_kind and never change.
type HolderKind int32

// The kinds of holder.
const (
	// HolderNone: not held (a free or failed node, or no holder on a quorum).
	HolderNone HolderKind = C.REDLOCK_HOLDER_NONE
	// HolderLock: a plain lock of this library. Its ID is the lock's value (Lock.Value of the
	// Lock that holds it), its Label the label of the manager that took it (WithLabel).
	HolderLock HolderKind = C.REDLOCK_HOLDER_LOCK
	// HolderReentrant: a reentrant lock of this library (WithOwner). Its ID and Label are the
	// owner id.
	HolderReentrant HolderKind = C.REDLOCK_HOLDER_REENTRANT
	// HolderOther: any other key under the lock's name: another library's lock (redsync's,
	// node-redlock's, with WithKeyPrefix("")), a value in an older format, or a key that is
	// not a lock at all. It still excludes this library's locks on that node. Its ID is the
	// key's value if it is a string, else empty.
	HolderOther HolderKind = C.REDLOCK_HOLDER_OTHER
	// HolderShared: shared (read) locks of this library (WithShared), one or more of them:
	// the key is one hash of every shared holder's hold. Its ID is empty and it has no Label;
	// HeldFor is how long the resource has been held shared without a break.
	HolderShared HolderKind = C.REDLOCK_HOLDER_SHARED
)

// String returns "none", "lock", "reentrant", "other", "shared", or "HolderKind(n)" for other
// numbers.
func (k HolderKind) String() string {
	switch k {
	case HolderNone:
		return "none"
	case HolderLock:
		return "lock"
	case HolderReentrant:
		return "reentrant"
	case HolderOther:
		return "other"
	case HolderShared:
		return "shared"
	}
	return "HolderKind(" + strconv.Itoa(int(k)) + ")"
}

// Holder is who holds a resource: on one node (NodeHold), or on a quorum of nodes
// (Holders.Holder).
//
// HeldFor and TTL are whole milliseconds; a negative value (-1 ns) means "unknown" for
// HeldFor and "no expiry" for TTL, and both are -1 ns when nothing is held.
type Holder struct {
	// Kind is what kind of key it is; HolderNone when nothing is held.
	Kind HolderKind
	// ID is the holder's identity: a plain lock's whole value (the same on every node it was
	// taken on, unique to its Lock: Lock.Value), a reentrant lock's owner id, another string
	// key's value; empty (nil) when nothing is held or for a key that is not a string.
	ID []byte
	// Label is a person-readable name for the holder: the label of the manager that took a
	// plain lock (WithLabel), the owner id of a reentrant one (invalid UTF-8 replaced by
	// U+FFFD); "" when there is none.
	Label string
	// HeldFor is how long the lock has been held: for a reentrant lock since its tenure began,
	// on the node's clock; for a plain lock since the holder's wall clock said its attempt
	// started, read against the node's clock (so off by as much as those two clocks disagree;
	// never negative). For the quorum's holder it is the longest among the nodes that hold it.
	// Negative (-1 ns) when unknown: for HolderOther keys, and when nothing is held.
	HeldFor time.Duration
	// TTL is the key's remaining time to live on the node; for the quorum's holder, how long
	// it stays on a quorum unless it is renewed (the quorum-th longest TTL among the nodes
	// that hold it). Negative (-1 ns) when the key has no expiry, and when nothing is held.
	TTL time.Duration
}

// NodeHold is one node's answer in a Holders snapshot: its State, and when the State is
// HoldHeld, the Holder on that node (otherwise the embedded Holder has Kind HolderNone, no ID
// or Label, and HeldFor and TTL of -1 ns).
type NodeHold struct {
	// Index is the node's position in the list given to New, from 0.
	Index int
	// State is whether the node holds a key for the resource, or could not be asked.
	State HoldState
	Holder
}

// Holders is a snapshot of who holds one resource, made by Manager.Holders: every node's
// answer and the holder a quorum of them agrees on.
//
// It is a snapshot for people and monitoring, never a reason to act: the holder can change
// (release, expire, be taken over) as soon as it is read. Take the lock to act safely.
// Everything in it is a copy in Go memory: it needs no Close, and it stays valid after its
// Manager is closed.
type Holders struct {
	// Resource is the resource asked about.
	Resource string
	// Nodes holds each node's answer, in the order the nodes were given to New.
	Nodes []NodeHold
	// Quorum is how many nodes make a quorum, N/2+1.
	Quorum int

	holder Holder
	locked bool
}

// IsLocked reports whether one holder (the same kind and ID) was found on at least a quorum
// of nodes: the resource was locked when the snapshot was taken.
func (h *Holders) IsLocked() bool {
	return h != nil && h.locked
}

// Holder returns the holder found on at least a quorum of nodes (the same kind and ID), and
// true; or, when no holder is on a quorum (the resource is free, or the nodes disagree, or
// too many failed to tell), a Holder with Kind HolderNone and false. Its Label is that
// holder's label, its HeldFor the longest among those nodes, its TTL how long it stays on a
// quorum unless renewed (see Holder). The ID is a copy.
func (h *Holders) Holder() (Holder, bool) {
	if h == nil || !h.locked {
		return Holder{Kind: HolderNone, HeldFor: -1, TTL: -1}, false
	}
	c := h.holder
	c.ID = bytes.Clone(c.ID)
	return c, true
}

// HeldOn returns how many nodes hold some key for the resource, whoever's it is.
func (h *Holders) HeldOn() int {
	return h.count(HoldHeld)
}

// Failed returns how many nodes could not be asked.
func (h *Holders) Failed() int {
	return h.count(HoldFailed)
}

func (h *Holders) count(st HoldState) int {
	if h == nil {
		return 0
	}
	n := 0
	for _, node := range h.Nodes {
		if node.State == st {
			n++
		}
	}
	return n
}

// holdersQuorum is REDLOCK_HOLDERS_QUORUM, SIZE_MAX: the index naming the quorum's holder.
const holdersQuorum = ^C.size_t(0)

// Compile-time check that REDLOCK_HOLDERS_QUORUM is ~0, that is -1 as a C int, which becomes
// SIZE_MAX as a size_t: each array length is negative unless it is.
var (
	_ [C.REDLOCK_HOLDERS_QUORUM + 1]struct{}
	_ [-1 - C.REDLOCK_HOLDERS_QUORUM]struct{}
)

// Holders asks every node who holds resource and returns the snapshot: each node's answer
// (free, held by whom, or failed) and the holder a quorum agrees on, with its label, how long
// it has been held and how long it stays. It waits for every node, each for at most its node
// timeout (WithTimeouts); a node that fails is reported as HoldFailed in Nodes, not as an
// error. It is one read-only script per node: it takes no lock and changes nothing.
//
// The resource is named as for Acquire (under the manager's key prefix, WithKeyPrefix).
//
// Errors: ErrInvalidArgument (a resource Acquire would refuse: empty, longer than
// MaxResourceLen, or a key in the library's own namespaces), ErrInternal, ErrClosed (after
// Close), ErrNullArgument (nil Manager).
func (m *Manager) Holders(resource string) (*Holders, error) {
	if m == nil {
		return nil, nilReceiver("*Manager")
	}
	if err := checkResource(resource); err != nil {
		return nil, err
	}
	s := newScratch(resource)
	defer s.free()
	snap, err := m.holdersGet(s)
	if err != nil {
		return nil, err
	}
	defer C.redlock_holders_free(snap)
	return readHolders(snap, resource, m.quorum, s)
}

// holdersGet makes the library call under the manager's read lock. The snapshot it returns
// belongs to the caller and no longer needs the manager.
func (m *Manager) holdersGet(s cScratch) (*C.redlock_holders, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.ptr == nil {
		return nil, ErrClosed
	}
	var snap *C.redlock_holders
	st := C.redlock_holders_get(m.ptr, s.res, s.n, &snap, s.err, errBufLen)
	runtime.KeepAlive(m)
	if st != C.REDLOCK_STATUS_OK {
		return nil, statusError(st, s.err)
	}
	return snap, nil
}

// readHolders copies a C snapshot into Go memory. s's buffer is reused for the labels and
// IDs.
func readHolders(snap *C.redlock_holders, resource string, quorum int, s cScratch) (*Holders, error) {
	n := int(C.redlock_holders_node_count(snap))
	h := &Holders{Resource: resource, Quorum: quorum, Nodes: make([]NodeHold, n)}
	for i := range h.Nodes {
		st, holder, err := readHolder(snap, C.size_t(i), s)
		if err != nil {
			return nil, err
		}
		h.Nodes[i] = NodeHold{Index: i, State: st, Holder: holder}
	}
	st, holder, err := readHolder(snap, holdersQuorum, s)
	if err != nil {
		return nil, err
	}
	h.holder, h.locked = holder, st == HoldHeld
	return h, nil
}

// readHolder copies one entry (a node's, or the quorum's for holdersQuorum).
func readHolder(snap *C.redlock_holders, index C.size_t, s cScratch) (HoldState, Holder, error) {
	var info C.redlock_holder_info
	if st := C.redlock_holders_info(snap, index, &info, s.err, errBufLen); st != C.REDLOCK_STATUS_OK {
		return 0, Holder{}, statusError(st, s.err) // only for an index out of range: a bug
	}
	h := Holder{
		Kind:    HolderKind(info.kind),
		HeldFor: holderMillis(info.held_for_ms),
		TTL:     holderMillis(info.ttl_ms),
	}
	if HoldState(info.state) != HoldHeld {
		return HoldState(info.state), h, nil
	}
	h.Label = snprintfString(s, func(buf *C.char, n C.size_t) C.size_t {
		return C.redlock_holders_label(snap, index, buf, n)
	})
	h.ID = holderID(snap, index, s)
	return HoldState(info.state), h, nil
}

// holderMillis converts the C ABI's milliseconds, -1 for unknown or no expiry, to a
// duration: -1 ns for any negative value, saturated at the largest duration.
func holderMillis(ms C.int64_t) time.Duration {
	switch {
	case ms < 0:
		return -1
	case int64(ms) > math.MaxInt64/int64(time.Millisecond):
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// holderID copies an entry's identity: into the pooled buffer, or, for one longer than that
// (another string key's value may be of any length), into C memory of its size. The snapshot
// is immutable, so the second call returns the same length.
func holderID(snap *C.redlock_holders, index C.size_t, s cScratch) []byte {
	buf, size := s.buf.p, C.size_t(scratchLen)
	n := C.redlock_holders_id(snap, index, (*C.uint8_t)(buf), size)
	if n == 0 {
		return nil
	}
	if n > size {
		buf = C.malloc(n)
		defer C.free(buf)
		n = min(n, C.redlock_holders_id(snap, index, (*C.uint8_t)(buf), n))
	}
	return bytes.Clone(unsafe.Slice((*byte)(buf), n))
}
