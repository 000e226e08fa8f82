package redlock

import "time"

// LockOption configures one acquisition; pass options to Manager.Lock, TryLock or LockWait:
//
//	l, err := m.Lock("orders:42", 10*time.Second,
//		redlock.Fenced(),                // l.FencingToken() orders this grant
//		redlock.AutoRenew(time.Hour),    // renewed until Unlock, for at most an hour
//		redlock.OnLost(func(l *redlock.Lock) { log.Print("lost: ", l.LostReason()) }))
//
// Options are checked before anything is sent; a bad one makes the call return
// ErrInvalidArgument. Later options override earlier ones of the same kind.
type LockOption func(*lockOptions)

type lockOptions struct {
	err error

	fenced bool

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
	return o, nil
}

// Fenced asks for a fencing token: the lock's FencingToken is strictly greater than that of
// every earlier fenced grant of the same resource (as long as a majority of the nodes keeps
// its data). Give the token to the storage the lock protects, and have it refuse writes
// carrying a token lower than one it has seen: a holder that was paused past its validity
// (a GC pause, a stopped VM) then cannot overwrite the work of the next holder.
//
// Fenced acquisition costs a second round trip: the token is read from the granting quorum's
// counters (the Redis keys "redlock-fence:" followed by the resource, which never expire) and
// written back before the grant counts. It composes with every other option and with Lock,
// TryLock and LockWait.
func Fenced() LockOption {
	return func(o *lockOptions) { o.fenced = true }
}

// AutoRenew turns on auto-renewal as soon as the lock is acquired, as Lock.AutoRenew does:
// the manager's renewal thread extends the lock to its TTL whenever a third of it has passed,
// until Unlock, StopRenewal or Free, for at most maxHold from the acquisition (0 means the
// library's default, one hour). If a renewal cannot be confirmed in time, or a bound is
// reached, the lock is reported lost shortly before its validity ends: the Lost channel is
// closed, LostReason says why, and the OnLost callback (if given) runs.
//
// maxHold must be in [0, MaxTTL] (rounded up to whole milliseconds). If renewal cannot be
// started after the lock was acquired, the call unlocks (best effort) and frees the lock and
// returns the error.
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
