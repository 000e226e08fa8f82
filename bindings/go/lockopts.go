package redlock

import "time"

// LockOption configures one acquisition; pass options to Manager.Acquire (or Lock, TryLock,
// LockWait, LockContext, the *Many methods for several resources, and a Semaphore's methods
// for a permit):
//
//	l, err := m.Acquire("orders:42", 10*time.Second,
//		redlock.Wait(5*time.Second),     // wait up to 5 s for a release (NoWait: one attempt)
//		redlock.Fenced(),                // l.FencingToken() orders this grant
//		redlock.AutoRenew(time.Hour),    // renewed until Unlock, for at most an hour
//		redlock.OnLost(func(l *redlock.Lock) { log.Print("lost: ", l.LostReason()) }))
//
// Options are checked before anything is sent; a bad one makes the call return
// ErrInvalidArgument. Later options override earlier ones of the same kind (Wait and NoWait
// are one kind). TryLock and LockWait fix the wait themselves and refuse Wait and NoWait.
type LockOption func(*lockOptions)

// waitMode is how an acquisition waits while the resource is held elsewhere.
type waitMode uint8

const (
	waitRetries waitMode = iota // the manager's retry policy (WithRetry): the default
	waitNone                    // one attempt (NoWait, Wait(0), TryLock)
	waitFor                     // wait until waitMs have passed (Wait, LockWait, LockContext)
)

type lockOptions struct {
	err error

	wait    waitMode
	waitMs  uint32 // with waitFor: > 0
	waitSet bool   // a Wait or NoWait option was given

	fenced bool
	poll   bool // WithNotify(false): a waitFor wait polls with random pauses
	shared bool // WithShared: a shared (read) lock

	fair      bool   // WithFair: a fair (first-come, first-served) lock
	dropOutMs uint32 // WithDropOut: a fair waiter's drop-out time; 0 = the library's default

	owner    string // WithOwner: the reentrant lock's owner id
	ownerSet bool

	renew         bool
	maxHold       uint32 // ms; 0 = the library's default, one hour
	maxExtensions uint32 // 0 = no limit besides the hold time
	extSet        bool
	onLost        func(*Lock)
}

func (o *lockOptions) fail(err error) {
	if o.err == nil {
		o.err = err
	}
}

// lockOptionsOf applies opts (nil entries are skipped) and checks that they fit together.
func lockOptionsOf(opts []LockOption) (lockOptions, error) {
	if len(opts) == 0 { // the common case, without the heap allocation the options need
		return lockOptions{}, nil
	}
	return applyLockOptions(opts)
}

func applyLockOptions(opts []LockOption) (lockOptions, error) {
	var o lockOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.err != nil {
		return o, o.err
	}
	if !o.renew && (o.onLost != nil || o.extSet) {
		return o, invalidf("OnLost and MaxExtensions apply to auto-renewal: add the AutoRenew option")
	}
	// Which options combine (shared, owner, fair, drop-out) is the library's rule: it checks
	// them at the acquisition, and its message reaches the caller unchanged.
	return o, nil
}

// setWait records a wait of ms milliseconds (0: one attempt).
func (o *lockOptions) setWait(ms uint32) {
	if ms == 0 {
		o.wait, o.waitMs = waitNone, 0
	} else {
		o.wait, o.waitMs = waitFor, ms
	}
}

// NoWait makes Acquire a single attempt, with no retry: it fails at once with ErrNotAcquired
// while the resource is held elsewhere (TryLock is Acquire with NoWait). Without NoWait or
// Wait, Acquire retries as the manager's retry policy says (WithRetry).
func NoWait() LockOption {
	return func(o *lockOptions) {
		o.waitSet = true
		o.setWait(0)
	}
}

// Wait makes Acquire wait while the resource is held elsewhere, until d has passed: woken as
// soon as the holder releases it (or when its TTL runs out), it attempts again (see
// WithNotify; WithNotify(false) polls after random pauses of up to the retry delay set by
// WithRetry instead). No attempt starts after d, and the retry count does not apply (LockWait
// is Acquire with Wait). d must be in [0, MaxTTL] and is rounded up to whole milliseconds;
// Wait(0) is NoWait. Without NoWait or Wait, Acquire retries as the manager's retry policy
// says (WithRetry), and LockContext waits until its context ends.
func Wait(d time.Duration) LockOption {
	return func(o *lockOptions) {
		ms, ok := millis(d)
		if !ok {
			o.fail(invalidf("wait must be in [0, %v], got %v", MaxTTL, d))
			return
		}
		o.waitSet = true
		o.setWait(ms)
	}
}

// WithNotify chooses how a wait (Wait, LockWait, LockContext) waits while the resource is
// held elsewhere: by notification (true, the default) or by polling (false).
//
// By notification, the waiter sleeps until the holder releases the resource, which the
// library announces through Redis pub/sub, or until the holder's TTL runs out, and then
// attempts at once: it gets a released lock within about a round trip, however long the
// retry delay. Waiters of one manager queue, so that a release wakes one of them. It costs one
// subscriber connection per node and manager, shared by every waiter, opened on the first
// wait. When notifications cannot be relied on (a subscriber connection is lost, nodes fail)
// the waiter falls back to random pauses until they can.
//
// By polling, the waiter attempts again after random pauses of up to the retry delay
// (WithRetry), as before notifications existed. Without a wait (NoWait, TryLock, the retry
// policy) the option changes nothing.
func WithNotify(notify bool) LockOption {
	return func(o *lockOptions) { o.poll = !notify }
}

// Fenced asks for a fencing token: the lock's FencingToken is strictly greater than that of
// every earlier fenced grant of the same resource (as long as a majority of the nodes keeps
// its data). Give the token to the storage the lock protects, and have it refuse writes
// carrying a token lower than one it has seen: a holder that was paused past its validity
// (a GC pause, a stopped VM) then cannot overwrite the work of the next holder.
//
// Fenced acquisition costs a second round trip: the token is read from the granting quorum's
// counters (the Redis keys "redlock-fence:" followed by the resource, which never expire) and
// written back before the grant counts. It composes with every other option and with Acquire,
// Lock, TryLock and LockWait.
func Fenced() LockOption {
	return func(o *lockOptions) { o.fenced = true }
}

// WithOwner makes the lock reentrant for owner, a caller-chosen id of 1 to MaxOwnerLen bytes
// (any bytes: a job id, a request id, "host:pid:goroutine"). While the owner holds the lock,
// its next acquisition succeeds at once and returns a Lock of its own; the resource stays held
// until every Lock of that owner has been unlocked (or has expired), and another owner, or an
// acquisition without an owner, is refused meanwhile. Each Lock has its own TTL, renewal and
// Unlock; the key lives as long as the longest of them.
//
// The owner is the identity: another goroutine or process that presents the same owner is the
// same owner. That is how a restarted worker reclaims its job's lock without waiting out the
// TTL, and why two workers must never share an owner id. With Fenced, every Lock of one tenure
// of the owner carries the same fencing token. Without WithOwner a lock is not reentrant. A
// semaphore's permit is never reentrant: a Semaphore's methods refuse WithOwner with
// ErrInvalidArgument.
func WithOwner(owner string) LockOption {
	return func(o *lockOptions) {
		if len(owner) == 0 || len(owner) > MaxOwnerLen {
			o.fail(invalidf("owner id must be 1 to %d bytes, got %d", MaxOwnerLen, len(owner)))
			return
		}
		o.owner, o.ownerSet = owner, true
	}
}

// WithShared makes the lock shared (a read lock, as flock's LOCK_SH): any number of shared
// holders may hold a resource together, while an exclusive lock of the same resource (a lock
// taken without WithShared, plain, fenced or reentrant, or a lock of several resources that
// names it) excludes them all, and they exclude it. Lock.IsShared tells a shared lock.
//
// Writers are not starved: an exclusive locker that waits (Wait, LockWait, LockContext, the
// retry policy) and is refused by shared holders queues an intent, and new shared
// acquisitions then wait behind it while the holders already in finish; the intent goes away
// when the exclusive locker gets the lock or gives up. An exclusive TryLock (NoWait) queues
// nothing.
//
// A shared lock has no owner: WithShared with WithOwner is ErrInvalidArgument, and so is
// WithShared given to the *Many methods (AcquireMany, LockMany, …) or to a Semaphore's methods
// (a permit is not shared). Extend, auto-renewal, Fenced and waiting work as for an exclusive
// lock. The resource's key is then a Redis hash with one field per shared holder, "hold:"
// followed by its Token (a shared lock's Value is its Token, as a reentrant lock's is), and
// Manager.Holders reports HolderShared.
func WithShared() LockOption {
	return func(o *lockOptions) { o.shared = true }
}

// WithFair makes the lock fair: first come, first served. Waiters are granted it in the order
// they asked for it, across every process and node, rather than to whichever attempt lands
// first, and a release wakes the next waiter alone (on a channel of its own).
//
// A fair acquisition that is refused takes a ticket and queues it on every node (the Redis
// hash "redlock-fair:" followed by the lock key, one field per waiter; one more round trip);
// each node grants the lock only to the lowest live ticket, when the key is free. A waiter
// that queues after another has finished queueing always has a larger ticket; Lock.Ticket
// gives it, and Lock.IsFair tells a fair lock. A waiter refreshes its place at least every
// fifth of its drop-out time (WithDropOut); one that dies or is paused holds up the waiters
// behind it for at most that time, and one that gives up (its wait over, its context ended)
// leaves the queue at once. With NoWait (TryLock) a fair acquisition takes the lock only when
// it is free and nobody is queued, and queues nothing.
//
// Fair and plain acquisitions of one resource exclude each other as any two locks do, but a
// plain one does not queue: it may take the lock ahead of the fair waiters. Fenced, waiting,
// contexts, Extend and auto-renewal work as for a plain lock. A fair lock is neither reentrant
// nor shared: WithFair with WithOwner or WithShared is ErrInvalidArgument, and so is WithFair
// given to the *Many methods or to a Semaphore's methods. The options of a fair acquisition
// are made for the call and freed after it (as those of a reentrant one).
func WithFair() LockOption {
	return func(o *lockOptions) { o.fair = true }
}

// WithDropOut sets a fair waiter's drop-out time (see WithFair): the longest a waiter that
// stops refreshing its place in the queue (it died, or is paused) holds up the waiters behind
// it. Each waiter refreshes its place at least every fifth of it, so a shorter time costs
// more attempts. d is rounded up to whole milliseconds and must be in [MinDropOut,
// MaxDropOut]; 0 means the default: the lock's TTL or DefaultDropOut, whichever is shorter.
// A non-zero drop-out time without WithFair is ErrInvalidArgument.
func WithDropOut(d time.Duration) LockOption {
	return func(o *lockOptions) {
		ms, ok := millis(d)
		if !ok || (ms != 0 && (ms < minDropOutMs || ms > maxDropOutMs)) {
			o.fail(invalidf("drop-out time must be 0 (the default) or in [%v, %v], got %v", MinDropOut, MaxDropOut, d))
			return
		}
		o.dropOutMs = ms
	}
}

// AutoRenew turns on auto-renewal as soon as the lock is acquired, as Lock.AutoRenew does:
// the manager's renewal thread extends the lock to its TTL whenever a third of it has passed,
// until Unlock, StopRenewal or Free, for at most maxHold from the acquisition (0 means the
// library's default, one hour). If a renewal cannot be confirmed in time, or a bound is
// reached, the lock is reported lost shortly before its validity ends: the Lost channel is
// closed, LostReason says why, and the OnLost callback (if given) runs.
//
// maxHold must be in [0, MaxTTL] (rounded up to whole milliseconds). Renewal is started right
// after the grant, as by Lock.AutoRenew (so Lost, WaitLost and LostReason work alike with and
// without OnLost). If it cannot be started, the call unlocks (best effort) and frees the lock
// and returns the error.
func AutoRenew(maxHold time.Duration) LockOption {
	return func(o *lockOptions) {
		ms, ok := millis(maxHold)
		if !ok {
			o.fail(invalidf("maximum hold must be in [0, %v], got %v", MaxTTL, maxHold))
			return
		}
		o.renew, o.maxHold = true, ms
	}
}

// MaxExtensions bounds auto-renewal to n automatic extensions; when the next one would be due
// after n, the lock is reported lost (0, the default, means no limit besides the hold time).
// It needs the AutoRenew option.
func MaxExtensions(n uint32) LockOption {
	return func(o *lockOptions) { o.maxExtensions, o.extSet = n, true }
}

// OnLost sets a callback run once, in a goroutine of its own, when auto-renewal reports the
// lock lost (it is not called after Unlock, StopRenewal or Free). It receives the lock, so
// it can read LostReason or Resource. It needs the AutoRenew option. A nil f is allowed and
// sets no callback.
//
// The callback keeps the Lock reachable while renewal is on; once renewal stops (lost,
// Unlock, StopRenewal, Free) the reference is dropped.
func OnLost(f func(*Lock)) LockOption {
	return func(o *lockOptions) { o.onLost = f }
}
