// Package redlock is the Go binding of redlock, a Redlock distributed lock manager: a lock is
// held when a quorum (N/2+1) of N independent Redis masters grant it, each with a TTL, and is
// valid for the TTL minus the time the acquisition took minus a clock-drift allowance.
//
// The package wraps the library's C ABI (include/redlock.h) through cgo; it has no
// dependencies beyond the standard library.
//
//	m, err := redlock.New([]string{"redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003"},
//		redlock.WithRetry(3, 200*time.Millisecond))
//	if err != nil {
//		return err
//	}
//	defer m.Close()
//
//	l, err := m.Lock("orders:42", 10*time.Second)
//	if errors.Is(err, redlock.ErrNotAcquired) {
//		return err // held by someone else; try again later
//	}
//	if err != nil {
//		return err // ErrUnavailable: too many nodes down or in restart quarantine; ErrInvalidArgument: bad input
//	}
//	defer l.Free()
//	// ... work, finishing before l.Validity() runs out, or call l.Extend(10 * time.Second)
//	err = l.Unlock()
//
// Manager.Acquire takes options (Lock is the same call; TryLock and LockWait are Acquire with
// a wait of their own). NoWait makes a single attempt, Wait(d) waits up to d for the holder to
// release the lock (woken by the release, see WithNotify), and without either the manager's
// retry policy (WithRetry) applies. For work of unknown length,
// AutoRenew has the manager's renewal thread extend the lock from the moment it is acquired,
// and reports through Lost (a channel), IsLost, WaitLost, LostReason and an OnLost callback if
// it cannot. Fenced gives the lock a fencing token, larger than that of every earlier fenced
// grant of the resource, for the protected storage to refuse writes from a holder that was
// paused past its validity:
//
//	l, err := m.Acquire("orders:42", 10*time.Second,
//		redlock.Wait(5*time.Second), redlock.Fenced(), redlock.AutoRenew(time.Hour))
//	if err != nil {
//		return err
//	}
//	defer l.Free()
//	defer l.Unlock()
//	select {
//	case <-l.Lost():
//		return errors.New("lock lost: " + l.LostReason())
//	case <-done: // every write carried l.FencingToken()
//	}
//
// The method Lock.AutoRenew starts (or reconfigures) renewal of a lock already held.
//
// # Contexts
//
// Manager.LockContext waits for the lock until its context ends: until the deadline, or until
// the context is cancelled, woken as soon as the holder releases the lock. A cancelled context
// ends the call at once (within one round trip if an attempt is under way), leaving no key
// behind, with ErrCancelled, which also matches context.Canceled; a deadline that passes gives
// ErrNotAcquired, which also matches context.DeadlineExceeded:
//
//	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
//	defer cancel()
//	l, err := m.LockContext(ctx, "orders:42", 10*time.Second)
//	if errors.Is(err, context.DeadlineExceeded) {
//		return err // still held by someone else after 5 s (errors.Is(err, redlock.ErrNotAcquired) too)
//	}
//
// # Shared locks and several resources
//
// WithShared makes a lock shared (a read lock): shared holders hold a resource together, and an
// exclusive lock of it excludes them all and is excluded by them; an exclusive locker that
// waits holds new shared lockers back, so writers are not starved. AcquireMany, LockMany,
// TryLockMany, LockManyWait and LockManyContext lock up to MaxResources resources at once,
// all or none, as one Lock (Lock.Resources lists them) whose Unlock, Extend and auto-renewal
// act on every one; overlapping sets named in any order never deadlock:
//
//	l, err := m.LockManyWait([]string{"accounts:17", "accounts:4"}, 10*time.Second, 5*time.Second)
//	if err != nil {
//		return err // ErrInvalidArgument for no resources, a duplicate, more than MaxResources
//	}
//	defer l.Free()
//	defer l.Unlock()
//
// # Fair locks
//
// WithFair makes a lock fair: waiters are granted it first come, first served, across every
// process and node, and a release wakes the next waiter alone. A refused fair acquisition
// queues a ticket on the nodes (Lock.Ticket returns it); a waiter that dies holds up the ones
// behind it for at most its drop-out time (WithDropOut), and one that gives up leaves the queue
// at once. A fair lock is neither reentrant nor shared:
//
//	l, err := m.LockWait("printer", 10*time.Second, 30*time.Second, redlock.WithFair())
//	if err != nil {
//		return err // ErrNotAcquired: not our turn within 30 s
//	}
//	defer l.Free()
//	defer l.Unlock()
//
// # Semaphores
//
// Manager.Semaphore makes a counting semaphore over the quorum: at most its count of permits
// are valid at any instant, in every process together. It sends nothing; Semaphore.Acquire,
// TryAcquire, AcquireWait and AcquireContext each take one permit, as Acquire, TryLock,
// LockWait and LockContext take a lock (waits are woken by a release, a context cancels). The
// permit is a Lock: Unlock gives it back, Extend and auto-renewal keep it, Fenced gives it a
// fencing token, and Lock.Permit names its slot. Every caller of a semaphore names the same
// count (another one is ErrInvalidArgument while permits are held), and WithOwner, WithShared
// and WithFair do not apply:
//
//	exports, err := m.Semaphore("exports", 4)
//	if err != nil {
//		return err // ErrInvalidArgument: an empty name, 0 or more than MaxPermits permits
//	}
//	p, err := exports.AcquireWait(time.Minute, 30*time.Second)
//	if err != nil {
//		return err // ErrNotAcquired: all 4 held for 30 s
//	}
//	defer p.Free()
//	defer p.Unlock()
//
// # Leader election
//
// Manager.Election makes a leader election over the quorum: Election.Campaign waits until
// this candidate leads (or its context ends) and returns a Leadership, a fenced Lock renewed
// automatically whose fencing token is the term, greater than every earlier leader's;
// Election.Leader reads the leader, and Election.Observe sends each new one in increasing
// term order:
//
//	election, err := m.Election("scheduler", 10*time.Second)
//	if err != nil {
//		return err
//	}
//	leadership, err := election.Campaign(ctx, "10.0.0.7:8080")
//	if err != nil {
//		return err // ErrCancelled when ctx is cancelled
//	}
//	defer leadership.Free()
//	defer leadership.Resign()
//	<-leadership.Lost() // lead until told it is lost (or resign)
//
// # Restart quarantine
//
// A Redis node that does not persist every write comes back empty after a crash (and a
// FLUSHALL empties a running one): it could then grant a lock another client still holds. So,
// by default, such a node does not count toward a quorum for the manager's maximum TTL (60 s,
// DefaultMaxTTL, unless set with WithMaxTTL; lock TTLs may not exceed it), by when every lock
// key it lost has expired. The manager tells which nodes lost something from a marker each
// node holds (the key "redlock-marker", with the node's run_id, written only while the node
// is trusted): a brand-new cluster, where no node has a marker yet, is trusted at once, so
// the first lock on freshly started servers succeeds. A node that restarted or lost its
// keyspace is quarantined: its outcome is NodeQuarantined, and with too many such nodes
// acquisitions fail with ErrUnavailable ("… in restart quarantine for another 57.3 s (no
// marker: it restarted empty or its data was flushed, or it is new: …) …"). Manager.NodeStates tells which
// nodes are quarantined, for how long and why (QuarantineReason). WithRestartQuarantine(false)
// turns it off: only for nodes that persist every write (appendfsync always).
//
// # Who holds a lock
//
// Manager.Holders asks every node who holds a resource and returns a snapshot: each node's
// answer (free, held, or failed) and the holder a quorum agrees on, with its kind, ID (a plain
// lock's value, Lock.Value), label, how long it has been held and how long it stays. WithLabel
// names a manager's locks (for example "host:pid") so that the snapshot, and `redlock
// inspect`, can say whose they are. It is for people and monitoring, never a reason to act:
// take the lock for that.
//
//	h, err := m.Holders("orders:42")
//	if err != nil {
//		return err
//	}
//	if holder, ok := h.Holder(); ok {
//		log.Printf("held by %q for %v, %v left", holder.Label, holder.HeldFor, holder.TTL)
//	}
//
// WithKeyPrefix sets the prefix of the lock keys ("redlock:" by default); the empty prefix
// names keys after the resources themselves, as redsync and node-redlock do, so that services
// on both sides of a migration exclude each other.
//
// # Metrics
//
// Manager.Metrics returns the manager's counters and histograms (acquisitions by result,
// unlock and extend outcomes, renewals, quarantined nodes, per-node requests, errors and
// latency, …) in the Prometheus text exposition format, ready to serve on a /metrics endpoint.
//
// # Building
//
// Build the Rust library first, at the repository root: cargo build --release. By default the
// package links target/release/libredlock.a statically (the binary then needs nothing at run
// time); with the build tag redlock_dynamic it links target/release/libredlock.so, found at
// run time through an rpath. cgo must be enabled and a C compiler installed.
//
// # Errors
//
// Failures reported by the library are *Error values carrying the library's Status and
// message; match them with errors.Is against ErrNotAcquired, ErrNotHeld, ErrUnavailable,
// ErrAuth, ErrCancelled, ErrInvalidArgument, ErrNullArgument, ErrInvalidHandle, ErrInternal and
// ErrPanic. An error of LockContext (or LockManyContext, Semaphore.AcquireContext) whose
// context had ended also matches the context's error. Calls on a closed Manager, and Unlock or
// Extend on a freed Lock, return ErrClosed.
//
// # Durations
//
// The library counts whole milliseconds in 32 bits. Durations are checked in Go before any C
// call: TTLs must be positive, waits and timeouts non-negative, and none may exceed MaxTTL
// (about 49.7 days); otherwise the call returns ErrInvalidArgument, never a silently wrapped
// value. Sub-millisecond parts are rounded up, so a positive duration never becomes zero and
// the library never gets less than was asked for. The library itself rejects TTLs below its
// drift allowance (TTL × drift factor + 2 ms), hence MinTTL, and TTLs above the manager's
// maximum TTL (WithMaxTTL, DefaultMaxTTL by default).
//
// # Concurrency and memory
//
// A Manager and a Lock are safe for concurrent use. Each holds C memory. Manager.Close and
// Lock.Free release it, wait for calls in progress, and are idempotent; later calls return
// ErrClosed. Both are also released by finalizers if forgotten. Neither Close, Free nor a
// finalizer ever unlocks anything: a lock that is not unlocked expires after its TTL (Free
// and the finalizer stop auto-renewal; a Lock with an OnLost callback stays reachable while it
// is renewed). A Lock stays usable after its Manager is closed, and the two may be released in
// any order. IsLost and Renewing never wait for an Unlock, Extend or AutoRenew in progress on
// the same Lock.
package redlock
