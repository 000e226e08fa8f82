package redlock

// #include <stdlib.h>
// #include "redlock.h"
import "C"

import (
	"math"
	"strings"
	"time"
)

// The options of New: each With… function checks what only Go can (what C could not receive,
// a duration that does not fit the C ABI) and records the C call that applies its setting;
// New makes those calls, in one loop, and the library checks the values.

// Option configures a Manager; pass options to New.
type Option func(*options)

// options are New's options as the C calls that apply them to the config: set[k] applies
// setting k, nil when no option gave it (the last option given for a setting counts). err is
// the first option refused in Go.
type options struct {
	err error
	set [numSettings]configSetter
}

// configSetter applies one setting to the C config: it returns the library's status, with the
// library's message in errBuf (errBufLen bytes) when that is not OK.
type configSetter func(cfg *C.redlock_config, errBuf *C.char) C.enum_redlock_status

// setting names a setting of the C config, in the order New applies them (so the first
// setting the library refuses is the one reported).
type setting int

const (
	setRetry setting = iota
	setDriftFactor
	setTimeouts
	setMaxTTL
	setRestartQuarantine
	setLabel
	setKeyPrefix
	setTLSCAFile // tls.go
	setTLSClientCert
	setTLSServerName
	setTLSInsecureSkipVerify
	setSentinelAuth // sentinel.go
	setReplicaAcks
	numSettings
)

// newOptions applies opts (nil ones are skipped); the error is the first one refused.
func newOptions(opts []Option) (*options, error) {
	o := new(options)
	for _, opt := range opts {
		if opt != nil {
			opt(o)
		}
	}
	return o, o.err
}

// apply makes the C calls of every setting given, in order, and stops at the first the
// library refuses, whose message (in errBuf) it returns.
func (o *options) apply(cfg *C.redlock_config, errBuf *C.char) error {
	for _, set := range o.set {
		if set == nil {
			continue
		}
		if st := set(cfg, errBuf); st != C.REDLOCK_STATUS_OK {
			return statusError(st, errBuf)
		}
	}
	return nil
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
		o.set[setRetry] = func(cfg *C.redlock_config, e *C.char) C.enum_redlock_status {
			return C.redlock_config_set_retry(cfg, C.uint32_t(count), C.uint32_t(ms), e, errBufLen)
		}
	}
}

// WithDriftFactor sets the clock-drift factor: a lock's validity is shortened by
// TTL × factor + 2 ms. It must be finite and in [0, 1); the default is 0.01. The library
// checks the value; New returns ErrInvalidArgument for a bad one.
func WithDriftFactor(factor float64) Option {
	return func(o *options) {
		o.set[setDriftFactor] = func(cfg *C.redlock_config, e *C.char) C.enum_redlock_status {
			return C.redlock_config_set_drift_factor(cfg, C.double(factor), e, errBufLen)
		}
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
		if !ok { // 0 is the library's to refuse
			o.fail(invalidf("connect timeout must be in (0, %v], got %v", MaxTTL, connect))
			return
		}
		n, ok := millis(node)
		if !ok {
			o.fail(invalidf("node timeout must be in [0, %v], got %v", MaxTTL, node))
			return
		}
		o.set[setTimeouts] = func(cfg *C.redlock_config, e *C.char) C.enum_redlock_status {
			return C.redlock_config_set_timeouts(cfg, C.uint32_t(c), C.uint32_t(n), e, errBufLen)
		}
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
		if !ok { // 0 to 2 ms are the library's to refuse
			o.fail(invalidf("maximum TTL must be in [3ms, %v], got %v", MaxTTL, d))
			return
		}
		o.set[setMaxTTL] = func(cfg *C.redlock_config, e *C.char) C.enum_redlock_status {
			return C.redlock_config_set_max_ttl(cfg, C.uint32_t(ms), e, errBufLen)
		}
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
		o.set[setRestartQuarantine] = func(cfg *C.redlock_config, e *C.char) C.enum_redlock_status {
			return C.redlock_config_set_restart_quarantine(cfg, C.bool(on), e, errBufLen)
		}
	}
}

// WithLabel names this holder, for example "host:pid" or "billing-7:4242": the label is
// stored beside the token in the value of every plain lock the manager takes (Lock.Value), so
// that Manager.Holders (and `redlock inspect`) can say who holds a resource. A reentrant lock
// (WithOwner) is labelled by its owner id instead. The default is no label, and so is "".
//
// The label must be valid UTF-8 of at most MaxLabelLen bytes with no control characters
// (unicode.IsControl: no NUL, tab or newline); New returns ErrInvalidArgument otherwise, with
// the library's message (a NUL byte, which C could not receive, is refused here).
// Anyone who can read the keys can read it: put no secrets in it.
func WithLabel(label string) Option {
	return func(o *options) {
		if strings.IndexByte(label, 0) >= 0 {
			o.fail(invalidf("label must not contain control characters, got %q", label))
			return
		}
		o.set[setLabel] = func(cfg *C.redlock_config, e *C.char) C.enum_redlock_status {
			return withCString(label, func(cl *C.char) C.enum_redlock_status {
				return C.redlock_config_set_label(cfg, cl, e, errBufLen)
			})
		}
	}
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
		o.set[setKeyPrefix] = func(cfg *C.redlock_config, e *C.char) C.enum_redlock_status {
			return withCBytes(prefix, func(p *C.uint8_t, n C.size_t) C.enum_redlock_status {
				return C.redlock_config_set_key_prefix(cfg, p, n, e, errBufLen)
			})
		}
	}
}

func (o *options) fail(err error) {
	if o.err == nil {
		o.err = err
	}
}
