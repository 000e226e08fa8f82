package redlock

// #include <stdlib.h>
// #include "redlock.h"
import "C"

import (
	"runtime"
	"strconv"
	"time"
	"unsafe"
)

// QuarantineReason is why a node is in restart quarantine (NodeState.Reason). The numbers are
// those of the C ABI's redlock_quarantine_reason and never change.
//
// Each node holds a marker, the key "redlock-marker", with the node's run_id as of the time a
// manager that trusted the node wrote it. A node whose marker is current has kept its
// keyspace since then and counts; one that restarted or lost its keyspace does not count
// until the maximum TTL (WithMaxTTL) has passed, by when every lock key it may have lost has
// expired anyway.
type QuarantineReason int32

// The reasons for restart quarantine.
const (
	// QuarantineNone: not quarantined (or not heard from yet).
	QuarantineNone QuarantineReason = C.REDLOCK_QUARANTINE_NONE
	// QuarantineNoMarker: the node has no marker while other nodes have one, or its marker
	// vanished: it restarted empty or its keyspace was flushed. Quarantined until the maximum
	// TTL after the loss was first seen.
	QuarantineNoMarker QuarantineReason = C.REDLOCK_QUARANTINE_NO_MARKER
	// QuarantineStaleMarker: the node's marker holds another run_id: it restarted from disk
	// (AOF or RDB), or it is a replica promoted after a failover, possibly without the latest
	// writes. Quarantined until the maximum TTL after the manager first saw it so.
	QuarantineStaleMarker QuarantineReason = C.REDLOCK_QUARANTINE_STALE_MARKER
	// QuarantineRestartSeen: this manager saw the node's run_id change (a restart, or a
	// failover behind the same address). Quarantined until the maximum TTL after it saw it.
	QuarantineRestartSeen QuarantineReason = C.REDLOCK_QUARANTINE_RESTART_SEEN
	// QuarantineYoung: no node has a marker yet (a running cluster meeting the library for the
	// first time) and this node has been up for less than the maximum TTL. Quarantined until
	// the maximum TTL after its start.
	QuarantineYoung QuarantineReason = C.REDLOCK_QUARANTINE_YOUNG
	// QuarantineUndecided: no node has a marker yet and not every node has answered. A
	// brand-new cluster is trusted as soon as every node has answered, or at the latest the
	// maximum TTL after the node was first seen.
	QuarantineUndecided QuarantineReason = C.REDLOCK_QUARANTINE_UNDECIDED
	// QuarantinePromoted: the server was promoted (a replica made master: a new replication
	// history its marker does not know), possibly without its old master's last writes.
	// Quarantined until the maximum TTL after the manager first saw it so.
	QuarantinePromoted QuarantineReason = C.REDLOCK_QUARANTINE_PROMOTED
)

// String returns a short name: "none", "no marker", "stale marker", "restart seen", "young",
// "undecided", "promoted", or "QuarantineReason(n)" for other numbers.
func (r QuarantineReason) String() string {
	switch r {
	case QuarantineNone:
		return "none"
	case QuarantineNoMarker:
		return "no marker"
	case QuarantineStaleMarker:
		return "stale marker"
	case QuarantineRestartSeen:
		return "restart seen"
	case QuarantineYoung:
		return "young"
	case QuarantineUndecided:
		return "undecided"
	case QuarantinePromoted:
		return "promoted"
	}
	return "QuarantineReason(" + strconv.Itoa(int(r)) + ")"
}

// NodeState is what a Manager knows of one node (see Manager.NodeStates).
type NodeState struct {
	// Index is the node's position in the list given to New, from 0.
	Index int
	// Quarantined is whether the node is in restart quarantine: it may have lost lock keys
	// (it restarted, or its keyspace was flushed), so its grants do not count toward a quorum
	// (see QuarantineReason). A node the manager has not heard from yet is not quarantined.
	Quarantined bool
	// Remaining is how much longer the quarantine lasts at most (whole milliseconds); 0 when
	// the node is not quarantined.
	Remaining time.Duration
	// Reason is why the node is quarantined; QuarantineNone exactly when Quarantined is
	// false.
	Reason QuarantineReason
}

// nodeStateTries bounds the reads of one node's state in NodeStates (see there).
const nodeStateTries = 3

// NodeStates returns the state of every node, in the order given to New. The manager learns
// a node's standing when it connects to it (on the first acquisition, and after every
// reconnection; a node that loses its keyspace is also noticed by the next grant), so before
// that no node is quarantined.
//
// Whether a node is quarantined and why are read with two library calls
// (redlock_manager_node_state, redlock_manager_node_quarantine_reason); should the node's
// standing change between them, they are read again, so that Reason is QuarantineNone exactly
// when Quarantined is false. (Should it keep changing, the node is reported as one of the
// reads saw it: not quarantined.)
//
// Errors: ErrClosed (after Close), ErrNullArgument (nil Manager).
func (m *Manager) NodeStates() ([]NodeState, error) {
	if m == nil {
		return nil, nilReceiver("*Manager")
	}
	s := newScratch("")
	defer s.free()
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.ptr == nil {
		return nil, ErrClosed
	}
	states := make([]NodeState, m.nodes)
	for i := range states {
		states[i] = NodeState{Index: i}
		for try := 0; try < nodeStateTries; try++ {
			var quarantined C.bool
			var remaining C.uint32_t
			st := C.redlock_manager_node_state(m.ptr, C.size_t(i), &quarantined, &remaining, s.err, errBufLen)
			if st != C.REDLOCK_STATUS_OK {
				return nil, statusError(st, s.err)
			}
			reason := QuarantineReason(C.redlock_manager_node_quarantine_reason(m.ptr, C.size_t(i)))
			if bool(quarantined) == (reason != QuarantineNone) {
				if quarantined {
					states[i].Quarantined = true
					states[i].Remaining = time.Duration(remaining) * time.Millisecond
					states[i].Reason = reason
				}
				break
			}
		}
	}
	runtime.KeepAlive(m)
	return states, nil
}

// Metrics returns the manager's metrics in the Prometheus text exposition format (version
// 0.0.4: "# HELP" and "# TYPE" lines, then samples), ready to be served on a /metrics
// endpoint or appended to one. Every name starts with "redlock_": acquisitions by result
// (redlock_acquire_total{result="granted"}, …), attempts and retries, wait and hold times,
// unlock and extend outcomes, renewals, keys restored, lost locks, quarantined nodes, and per
// node requests, errors by kind and latency. Node addresses never include a password.
//
// The counters are the manager's own (each Manager counts separately), from New on.
//
// Errors: ErrClosed (after Close), ErrNullArgument (nil Manager).
func (m *Manager) Metrics() (string, error) {
	if m == nil {
		return "", nilReceiver("*Manager")
	}
	s := newScratch("")
	defer s.free()
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.ptr == nil {
		return "", ErrClosed
	}
	text := snprintfString(s, func(buf *C.char, n C.size_t) C.size_t {
		return C.redlock_manager_metrics(m.ptr, buf, n)
	})
	runtime.KeepAlive(m)
	return text, nil
}

// snprintfString runs an snprintf-style C function (it writes at most n-1 bytes and a NUL
// into buf, and returns the full length) until the whole text fits: first into the pooled
// buffer s, then into C memory of the size the previous call asked for (with some room, as
// the text may grow between calls).
func snprintfString(s cScratch, call func(buf *C.char, n C.size_t) C.size_t) string {
	buf, size := (*C.char)(s.buf.p), C.size_t(scratchLen)
	for {
		n := call(buf, size)
		if n < size {
			text := string(unsafe.Slice((*byte)(unsafe.Pointer(buf)), n))
			if unsafe.Pointer(buf) != s.buf.p {
				C.free(unsafe.Pointer(buf))
			}
			return text
		}
		if unsafe.Pointer(buf) != s.buf.p {
			C.free(unsafe.Pointer(buf))
		}
		size = n + n/8 + 256
		buf = (*C.char)(C.malloc(size))
	}
}

// AdmitNewNodes trusts nodes you know are new (started empty, never held a lock), so that
// they count at once instead of after a restart quarantine (redlock_manager_admit_new_nodes).
// nodes are indexes in the node list (0 for the first). A node quarantined for a reason a new
// server can have (no marker; young in a cluster with no marker yet) is trusted and its marker
// written, confirmed before AdmitNewNodes returns. Admitting a node that did hold a lock and
// lose it can grant that lock twice within its TTL.
//
// Errors: ErrInvalidArgument (an index out of range, a cluster node, restart quarantine off,
// or a node quarantined for what it did: a restart seen, a promotion, a stale marker),
// ErrUnavailable (a node did not answer, or its marker write was not confirmed), ErrClosed,
// ErrNullArgument (nil Manager).
func (m *Manager) AdmitNewNodes(nodes ...int) error {
	if m == nil {
		return nilReceiver("*Manager")
	}
	idx := make([]C.size_t, len(nodes)+1) // one more: never a zero-length array to take from
	for i, n := range nodes {
		if n < 0 {
			return &Error{Status: StatusInvalidArgument,
				Message: "invalid argument: node " + strconv.Itoa(n) + " is not a node index (0 for the first node)"}
		}
		idx[i] = C.size_t(n)
	}
	s := newScratch("")
	defer s.free()
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.ptr == nil {
		return ErrClosed
	}
	st := C.redlock_manager_admit_new_nodes(m.ptr, &idx[0], C.size_t(len(nodes)), s.err, errBufLen)
	if st != C.REDLOCK_STATUS_OK {
		return statusError(st, s.err)
	}
	return nil
}
