package redlock

// #include <stdlib.h>
// #include "redlock.h"
import "C"

import (
	"runtime"
	"time"
	"unsafe"
)

// NodeState is what a Manager knows of one node (see Manager.NodeStates).
type NodeState struct {
	// Index is the node's position in the list given to New, from 0.
	Index int
	// Quarantined is whether the node is in restart quarantine: it was seen up for less than
	// the maximum TTL, so its grants do not count toward a quorum. A node the manager has
	// not connected to yet is not quarantined.
	Quarantined bool
	// Remaining is how much longer the quarantine lasts (whole milliseconds); 0 when the node
	// is not quarantined.
	Remaining time.Duration
}

// NodeStates returns the state of every node, in the order given to New. The manager learns
// a node's uptime when it connects to it (on the first acquisition, and after every
// reconnection), so before that no node is quarantined.
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
		var quarantined C.bool
		var remaining C.uint32_t
		st := C.redlock_manager_node_state(m.ptr, C.size_t(i), &quarantined, &remaining, s.err, errBufLen)
		if st != C.REDLOCK_STATUS_OK {
			return nil, statusError(st, s.err)
		}
		states[i] = NodeState{
			Index:       i,
			Quarantined: bool(quarantined),
			Remaining:   time.Duration(remaining) * time.Millisecond,
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
