package redlock

// #include <stdlib.h>
// #include "redlock.h"
import "C"

import (
	"strings"
	"time"
)

// Failover groups: a node given to New may be a Sentinel-managed master and its replicas,
//
//	redis+sentinel://[[user]:password@]host[:port][,host[:port]…]/SERVICE[/db]
//
// (sentinel port 26379 when omitted; rediss+sentinel:// for TLS to the sentinels and the
// master). It is one node of the N, whichever server is its master: every new connection asks
// its sentinels for the master of SERVICE, and the master's handshake checks role:master. The
// URL's credentials and database are the master's. A promoted master is quarantined like a
// restarted one (QuarantinePromoted, QuarantineStaleMarker, QuarantineRestartSeen). A node
// whose sentinels fail is reported as NodeSentinel, the error's message naming each sentinel
// and what it said. Any node URL may end in ?durable=true: restart quarantine is then off for
// that node alone (a service whose failovers and restarts keep every write). See the
// repository's docs/operations.md, "Failover groups".

// WithSentinelAuth sets the credentials every failover group's sentinels are asked with (AUTH
// on each connection to a sentinel), for sentinels with requirepass: username "" is the
// default user. The default is none. The password must not be empty; New returns
// ErrInvalidArgument otherwise (a NUL byte, which C could not receive, is refused here).
func WithSentinelAuth(username, password string) Option {
	return func(o *options) {
		if strings.IndexByte(username, 0) >= 0 || strings.IndexByte(password, 0) >= 0 {
			o.fail(invalidf("the sentinels' user name and password must not contain a NUL byte"))
			return
		}
		o.set[setSentinelAuth] = func(cfg *C.redlock_config, e *C.char) C.enum_redlock_status {
			return withCString(password, func(pw *C.char) C.enum_redlock_status {
				if username == "" {
					return C.redlock_config_set_sentinel_auth(cfg, nil, pw, e, errBufLen)
				}
				return withCString(username, func(u *C.char) C.enum_redlock_status {
					return C.redlock_config_set_sentinel_auth(cfg, u, pw, e, errBufLen)
				})
			})
		}
	}
}

// WithReplicaAcks makes a grant count on a failover group only once replicas of its master's
// replicas acknowledged it within timeout: WAIT replicas timeout is written right behind every
// grant, and a grant it did not see acknowledged does not count (NodeUnacknowledged; it is
// released). A failover to a replica that acknowledged keeps the lock, and a master cut off
// from its replicas grants nothing that counts; replication stays asynchronous, so restart
// quarantine is still needed. Plain nodes are not affected. The default is off. replicas must
// be ≥ 1 and timeout > 0 (rounded up to whole milliseconds); New returns ErrInvalidArgument
// otherwise.
func WithReplicaAcks(replicas int, timeout time.Duration) Option {
	return func(o *options) {
		ms, ok := millis(timeout)
		if replicas < 0 || uint64(replicas) > 1<<32-1 || !ok {
			o.fail(invalidf("replica acknowledgements: replicas in [1, 2^32-1] and a timeout in (0, %v], got %d and %v", MaxTTL, replicas, timeout))
			return
		}
		o.set[setReplicaAcks] = func(cfg *C.redlock_config, e *C.char) C.enum_redlock_status {
			return C.redlock_config_set_replica_acks(cfg, C.uint32_t(replicas), C.uint32_t(ms), e, errBufLen)
		}
	}
}
