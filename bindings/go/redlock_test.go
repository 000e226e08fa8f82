package redlock_test

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	redlock "github.com/redlock-quorum/redlock/bindings/go"
)

// Generous timeouts: CI machines have two busy cores.
var testTimeouts = redlock.WithTimeouts(time.Second, 500*time.Millisecond)

// newManager creates a manager with test timeouts and a short retry delay (later options
// override), closed when the test ends. Restart quarantine is on, as by default: the tests'
// servers are brand-new clusters, which it trusts at once.
func newManager(t testing.TB, nodes []string, opts ...redlock.Option) *redlock.Manager {
	t.Helper()
	all := append([]redlock.Option{testTimeouts, redlock.WithRetry(3, 50*time.Millisecond)}, opts...)
	m, err := redlock.New(nodes, all...)
	if err != nil {
		t.Fatalf("New(%v): %v", nodes, err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func wantIs(t testing.TB, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

func wantNoErr(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

var tokenRE = regexp.MustCompile(`^[0-9a-f]{40}$`)

// msRE matches the Unix milliseconds in a lock's value.
var msRE = regexp.MustCompile(`^[0-9]{13}$`)

func TestVersion(t *testing.T) {
	v := redlock.Version()
	if !regexp.MustCompile(`^\d+\.\d+\.\d+`).MatchString(v) {
		t.Fatalf("Version() = %q, want a semantic version", v)
	}
	if got := redlock.LinkMode(); got != wantLinkMode {
		t.Fatalf("LinkMode() = %q, want %q", got, wantLinkMode)
	}
}

func TestLockUnlockExtend(t *testing.T) {
	t.Parallel()
	m := newManager(t, sharedNodes)
	if m.NodeCount() != 3 || m.Quorum() != 2 {
		t.Fatalf("NodeCount, Quorum = %d, %d; want 3, 2", m.NodeCount(), m.Quorum())
	}
	res := uniq(t)
	l, err := m.Lock(res, 10*time.Second)
	wantNoErr(t, "Lock", err)
	defer l.Free()

	if v := l.Validity(); v <= 8*time.Second || v > 10*time.Second {
		t.Fatalf("Validity() = %v, want in (8s, 10s]", v)
	}
	if !l.Valid() {
		t.Fatal("Valid() = false right after Lock")
	}
	if !tokenRE.MatchString(l.Token()) {
		t.Fatalf("Token() = %q, want 40 hex characters", l.Token())
	}
	// Without a label the value is "<token>.<unix ms>", the start of the attempt.
	if tok, ms, ok := strings.Cut(l.Value(), "."); !ok || tok != l.Token() || !msRE.MatchString(ms) {
		t.Fatalf("Value() = %q, want %q followed by a dot and Unix milliseconds", l.Value(), l.Token())
	} else if n, _ := strconv.ParseInt(ms, 10, 64); time.Since(time.UnixMilli(n)).Abs() > time.Minute {
		t.Fatalf("Value() = %q: the time is not about now", l.Value())
	}
	if l.Resource() != res {
		t.Fatalf("Resource() = %q, want %q", l.Resource(), res)
	}
	outcomes := l.NodeOutcomes()
	if len(outcomes) != 3 {
		t.Fatalf("NodeOutcomes() = %v, want 3 entries", outcomes)
	}
	successes := 0
	for _, o := range outcomes {
		switch o {
		case redlock.NodeSuccess:
			successes++
		case redlock.NodePending:
		default:
			t.Fatalf("NodeOutcomes() = %v: only success and pending expected with every node up", outcomes)
		}
	}
	if g := l.Granted(); g != successes || g < m.Quorum() || g > m.NodeCount() {
		t.Fatalf("Granted() = %d with outcomes %v, quorum %d", g, outcomes, m.Quorum())
	}
	if !strings.Contains(l.String(), l.Token()[:8]) || !strings.Contains(l.String(), res) {
		t.Fatalf("String() = %q", l.String())
	}

	// The nodes really hold our token, with the TTL we asked for.
	if n := holding(t, sharedNodes, res, l.Value()); n < m.Quorum() {
		t.Fatalf("%d nodes hold the token right after Lock, want at least %d", n, m.Quorum())
	}
	if !eventually(settle, func() bool { return holding(t, sharedNodes, res, l.Value()) == 3 }) {
		t.Fatal("the third node never stored the token")
	}
	for _, u := range sharedNodes {
		if p := pttl(t, u, res); p <= 5000 || p > 10000 {
			t.Fatalf("PTTL on %s = %d ms, want in (5000, 10000]", u, p)
		}
	}

	// Someone else cannot take it.
	m2 := newManager(t, sharedNodes, redlock.WithRetry(1, 10*time.Millisecond))
	_, err = m2.TryLock(res, time.Second)
	wantIs(t, "TryLock on a held resource", err, redlock.ErrNotAcquired)
	var e *redlock.Error
	if !errors.As(err, &e) || e.Status != redlock.StatusNotAcquired || e.Message == "" {
		t.Fatalf("errors.As: %#v, want an *Error with status NotAcquired and a message", err)
	}
	if !strings.HasPrefix(err.Error(), "redlock: not acquired: ") {
		t.Fatalf("Error() = %q", err.Error())
	}
	_, err = m2.Lock(res, time.Second)
	wantIs(t, "Lock on a held resource", err, redlock.ErrNotAcquired)
	if n := holding(t, sharedNodes, res, l.Value()); n != 3 {
		t.Fatalf("failed attempts disturbed the holder: %d nodes hold its token", n)
	}

	// Extend, longer then shorter.
	wantNoErr(t, "Extend(30s)", l.Extend(30*time.Second))
	if v := l.Validity(); v <= 28*time.Second || v > 30*time.Second {
		t.Fatalf("Validity() after Extend(30s) = %v", v)
	}
	long := 0
	for _, u := range sharedNodes {
		if pttl(t, u, res) > 20000 {
			long++
		}
	}
	if long < m.Quorum() {
		t.Fatalf("only %d nodes have the extended TTL", long)
	}
	wantNoErr(t, "Extend(20s)", l.Extend(20*time.Second))
	if v := l.Validity(); v > 20*time.Second || v <= 18*time.Second {
		t.Fatalf("Validity() after Extend(20s) = %v", v)
	}

	// Unlock: the keys go, the lease reads as invalid, and a second unlock is refused.
	wantNoErr(t, "Unlock", l.Unlock())
	if l.Validity() != 0 || l.Valid() {
		t.Fatalf("after Unlock: Validity() = %v, Valid() = %v", l.Validity(), l.Valid())
	}
	if !eventually(settle, func() bool { return present(t, sharedNodes, res) == 0 }) {
		t.Fatal("the key is still on some node after Unlock")
	}
	wantIs(t, "second Unlock", l.Unlock(), redlock.ErrNotHeld)
	wantIs(t, "Extend after Unlock", l.Extend(time.Second), redlock.ErrNotHeld)

	// Now the other manager gets it.
	l2, err := m2.TryLock(res, time.Second)
	wantNoErr(t, "TryLock after Unlock", err)
	wantNoErr(t, "Unlock", l2.Unlock())
	l2.Free()
}

func TestHostPortAndBinaryResource(t *testing.T) {
	t.Parallel()
	// The "host:port" form, and a resource with NUL, CR, LF and invalid UTF-8.
	var nodes []string
	for _, u := range sharedNodes {
		nodes = append(nodes, addrOf(u))
	}
	m := newManager(t, nodes, redlock.WithMaxTTL(redlock.MaxTTL))
	res := "bin\x00\r\n\xff/" + uniq(t)
	l, err := m.TryLock(res, 5*time.Second)
	wantNoErr(t, "TryLock", err)
	defer l.Free()
	if l.Resource() != res {
		t.Fatalf("Resource() = %q, want %q", l.Resource(), res)
	}
	if n := holding(t, sharedNodes, res, l.Value()); n < 2 {
		t.Fatalf("%d nodes hold the binary key", n)
	}
	// The longest accepted name, and the longest TTL (the manager's maximum TTL raised to it).
	long := uniq(t)
	long += strings.Repeat("x", redlock.MaxResourceLen-len(long))
	l2, err := m.TryLock(long, redlock.MaxTTL)
	wantNoErr(t, "TryLock(1024-byte name, MaxTTL)", err)
	if v := l2.Validity(); v < redlock.MaxTTL/100*98 {
		t.Fatalf("Validity() with MaxTTL = %v", v)
	}
	wantNoErr(t, "Unlock", l2.Unlock())
	l2.Free()
	wantNoErr(t, "Unlock", l.Unlock())
}

func TestLockWait(t *testing.T) {
	t.Parallel()
	m1 := newManager(t, sharedNodes)
	m2 := newManager(t, sharedNodes, redlock.WithRetry(0, 20*time.Millisecond))
	res := uniq(t)
	l1, err := m1.Lock(res, 10*time.Second)
	wantNoErr(t, "Lock", err)
	defer l1.Free()

	// While it is held: a zero wait is one attempt; a 300 ms wait gives up after 300 ms.
	_, err = m2.LockWait(res, time.Second, 0)
	wantIs(t, "LockWait(wait 0)", err, redlock.ErrNotAcquired)
	start := time.Now()
	_, err = m2.LockWait(res, time.Second, 300*time.Millisecond)
	elapsed := time.Since(start)
	wantIs(t, "LockWait(wait 300ms)", err, redlock.ErrNotAcquired)
	if elapsed < 290*time.Millisecond || elapsed > 5*time.Second {
		t.Fatalf("LockWait(300ms) gave up after %v", elapsed)
	}

	// Released while we wait: LockWait gets it. (start before the releasing goroutine, so
	// that the release comes 200 ms after start at the earliest, however the goroutines are
	// scheduled.)
	released := make(chan error, 1)
	start = time.Now()
	go func() {
		time.Sleep(200 * time.Millisecond)
		released <- l1.Unlock()
	}()
	l2, err := m2.LockWait(res, 5*time.Second, 10*time.Second)
	elapsed = time.Since(start)
	wantNoErr(t, "Unlock by the first holder", <-released)
	wantNoErr(t, "LockWait while the holder releases", err)
	defer l2.Free()
	if elapsed < 150*time.Millisecond || elapsed > 9*time.Second {
		t.Fatalf("LockWait succeeded after %v, expected after the release at ~200ms", elapsed)
	}
	if n := holding(t, sharedNodes, res, l2.Value()); n < 2 {
		t.Fatalf("%d nodes hold the new token", n)
	}
	wantNoErr(t, "Unlock", l2.Unlock())
}

// Sixteen goroutines, on four managers, contend for one resource; each must observe that it is
// alone in the critical section and that a quorum of nodes really stores its token.
func TestContentionMutualExclusion(t *testing.T) {
	t.Parallel()
	const (
		goroutines = 16
		rounds     = 4
	)
	managers := make([]*redlock.Manager, 4)
	for i := range managers {
		managers[i] = newManager(t, sharedNodes, redlock.WithRetry(0, 20*time.Millisecond))
	}
	res := uniq(t)
	deadline := time.Now().Add(45 * time.Second)

	var (
		inside     atomic.Int32
		acquired   atomic.Int32
		violations atomic.Int32
		wg         sync.WaitGroup
		errMu      sync.Mutex
		errs       []string
	)
	fail := func(format string, args ...any) {
		errMu.Lock()
		defer errMu.Unlock()
		if len(errs) < 20 {
			errs = append(errs, fmt.Sprintf(format, args...))
		}
	}
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			m := managers[g%len(managers)]
			for r := 0; r < rounds; r++ {
				var l *redlock.Lock
				for attempt := 0; l == nil; attempt++ {
					if time.Now().After(deadline) || attempt > 200 {
						fail("goroutine %d round %d: no lock after %d attempts", g, r, attempt)
						return
					}
					var err error
					l, err = m.LockWait(res, 5*time.Second, 2*time.Second)
					if err != nil && !errors.Is(err, redlock.ErrNotAcquired) {
						fail("goroutine %d: LockWait: %v", g, err)
						return
					}
				}
				if n := inside.Add(1); n != 1 {
					violations.Add(1)
					fail("goroutine %d: %d holders in the critical section", g, n)
				}
				acquired.Add(1)
				held := 0
				for _, u := range sharedNodes {
					if v, err := respDo(addrOf(u), "GET", lockKey(res)); err == nil && v == l.Value() {
						held++
					}
				}
				if held < 2 {
					violations.Add(1)
					fail("goroutine %d: only %d nodes store its token while it holds the lock", g, held)
				}
				time.Sleep(2 * time.Millisecond)
				if !l.Valid() {
					fail("goroutine %d: validity ran out inside the critical section", g)
				}
				inside.Add(-1)
				if err := l.Unlock(); err != nil {
					fail("goroutine %d: Unlock: %v", g, err)
				}
				l.Free()
			}
		}(g)
	}
	wg.Wait()
	for _, e := range errs {
		t.Error(e)
	}
	if v := violations.Load(); v != 0 {
		t.Fatalf("%d mutual-exclusion violations", v)
	}
	if a := acquired.Load(); a != goroutines*rounds {
		t.Fatalf("%d acquisitions, want %d", a, goroutines*rounds)
	}
	if n := present(t, sharedNodes, res); n != 0 {
		t.Fatalf("the key is left on %d nodes", n)
	}
}

func TestNodeKilled(t *testing.T) {
	t.Parallel()
	servers := startCluster(t, 3)
	nodes := urls(servers)
	m := newManager(t, nodes, redlock.WithRetry(1, 20*time.Millisecond))
	res := uniq(t)

	l1, err := m.Lock(res+"/1", 10*time.Second)
	wantNoErr(t, "Lock with all nodes up", err)
	defer l1.Free()

	servers[0].kill()
	l2, err := m.Lock(res+"/2", 10*time.Second)
	wantNoErr(t, "Lock with one node of three down", err)
	defer l2.Free()
	if g := l2.Granted(); g != 2 {
		t.Fatalf("Granted() = %d with one node down, want 2", g)
	}
	// The dead node's outcome is whatever the library had learnt of it when the round was
	// decided: the connection found closed (unreachable), a reconnect refused or in backoff,
	// a timeout, or, when the two live nodes' grants made the quorum before the dead
	// connection was noticed (a loaded machine), pending. Never a grant.
	switch o := l2.NodeOutcomes(); {
	case len(o) != 3:
		t.Fatalf("NodeOutcomes() = %v", o)
	case o[0] != redlock.NodeUnreachable && o[0] != redlock.NodeTimeout && o[0] != redlock.NodeBackoff &&
		o[0] != redlock.NodePending:
		t.Fatalf("the dead node's outcome is %v (all: %v)", o[0], o)
	case o[1] != redlock.NodeSuccess || o[2] != redlock.NodeSuccess:
		t.Fatalf("the live nodes' outcomes are %v", o)
	}
	if n := holding(t, nodes[1:], res+"/2", l2.Value()); n != 2 {
		t.Fatalf("%d live nodes hold the token", n)
	}
	// The lock taken before the failure can still be extended and released by the quorum.
	wantNoErr(t, "Extend with one node down", l1.Extend(10*time.Second))
	wantNoErr(t, "Unlock with one node down", l1.Unlock())
	if n := present(t, nodes[1:], res+"/1"); n != 0 {
		t.Fatalf("the key is still on %d live nodes after Unlock", n)
	}

	servers[1].kill()
	for _, try := range []func() (*redlock.Lock, error){
		func() (*redlock.Lock, error) { return m.Lock(res+"/3", 10*time.Second) },
		func() (*redlock.Lock, error) { return m.TryLock(res+"/3", 10*time.Second) },
		func() (*redlock.Lock, error) { return m.LockWait(res+"/3", 10*time.Second, 100*time.Millisecond) },
	} {
		l, err := try()
		if l != nil {
			t.Fatal("acquired a lock with two nodes of three down")
		}
		wantIs(t, "acquire with two nodes down", err, redlock.ErrUnavailable)
		var e *redlock.Error
		if !errors.As(err, &e) || e.Message == "" {
			t.Fatalf("no message in %#v", err)
		}
	}
	if n := present(t, nodes[2:], res+"/3"); n != 0 {
		t.Fatal("a failed acquisition left its key on the live node")
	}
	wantIs(t, "Unlock with two nodes down", l2.Unlock(), redlock.ErrUnavailable)
}

func TestExpiredLock(t *testing.T) {
	t.Parallel()
	m1 := newManager(t, sharedNodes)
	m2 := newManager(t, sharedNodes)
	res := uniq(t)

	l1, err := m1.Lock(res, 300*time.Millisecond)
	wantNoErr(t, "Lock", err)
	defer l1.Free()
	if v := l1.Validity(); v <= 0 || v > 300*time.Millisecond {
		t.Fatalf("Validity() = %v", v)
	}
	if !eventually(3*time.Second, func() bool { return !l1.Valid() }) {
		t.Fatal("the lock never expired locally")
	}
	if l1.Validity() != 0 {
		t.Fatalf("Validity() = %v after expiry", l1.Validity())
	}
	if !eventually(3*time.Second, func() bool { return present(t, sharedNodes, res) == 0 }) {
		t.Fatal("the key never expired on the nodes")
	}

	// Someone else takes it; the expired holder can neither extend nor release it.
	l2, err := m2.TryLock(res, 10*time.Second)
	wantNoErr(t, "TryLock after expiry", err)
	defer l2.Free()
	wantIs(t, "Extend after expiry", l1.Extend(10*time.Second), redlock.ErrNotHeld)
	wantIs(t, "Unlock after expiry", l1.Unlock(), redlock.ErrNotHeld)
	if !eventually(settle, func() bool { return holding(t, sharedNodes, res, l2.Value()) == 3 }) {
		t.Fatal("the new holder's key was disturbed by the expired holder")
	}
	wantNoErr(t, "Unlock by the new holder", l2.Unlock())
}

func TestBadInputs(t *testing.T) {
	t.Parallel()
	// Managers: no nodes, malformed URLs, duplicates, bad options.
	for _, nodes := range [][]string{nil, {}} {
		_, err := redlock.New(nodes)
		wantIs(t, fmt.Sprintf("New(%#v)", nodes), err, redlock.ErrInvalidArgument)
	}
	for _, u := range []string{"", "not a url", "127.0.0.1", "redis://127.0.0.1:99999",
		"rediss://127.0.0.1:0", "redis://:hunter2@127.0.0.1:0", "redis://127.0.0.1:1/x",
		"redis://127.0.0.1:1\x00", "unix:///tmp/redis.sock", "redis://127.0.0.1:1?db=2",
		// Beyond what SELECT accepts (a C int): refused now, not at the first connect.
		"redis://:hunter2@127.0.0.1:1/99999999999"} {
		_, err := redlock.New([]string{u})
		wantIs(t, fmt.Sprintf("New(%q)", u), err, redlock.ErrInvalidArgument)
		if strings.Contains(err.Error(), "hunter2") {
			t.Fatalf("the password leaked into %q", err)
		}
	}
	_, err := redlock.New([]string{sharedNodes[0], sharedNodes[0]})
	wantIs(t, "New with a node listed twice", err, redlock.ErrInvalidArgument)

	bad := map[string]redlock.Option{
		"WithRetry(-1, 0)":             redlock.WithRetry(-1, 0),
		"WithRetry(1, -1ms)":           redlock.WithRetry(1, -time.Millisecond),
		"WithRetry(1, MaxTTL+1ms)":     redlock.WithRetry(1, redlock.MaxTTL+time.Millisecond),
		"WithDriftFactor(1)":           redlock.WithDriftFactor(1),
		"WithDriftFactor(-0.1)":        redlock.WithDriftFactor(-0.1),
		"WithDriftFactor(NaN)":         redlock.WithDriftFactor(math.NaN()),
		"WithDriftFactor(+Inf)":        redlock.WithDriftFactor(math.Inf(1)),
		"WithTimeouts(0, 0)":           redlock.WithTimeouts(0, 0),
		"WithTimeouts(-1s, 0)":         redlock.WithTimeouts(-time.Second, 0),
		"WithTimeouts(1s, -1ms)":       redlock.WithTimeouts(time.Second, -time.Millisecond),
		"WithTimeouts(1s, MaxTTL+1ms)": redlock.WithTimeouts(time.Second, redlock.MaxTTL+time.Millisecond),
		"WithTimeouts(MaxInt64, 0)":    redlock.WithTimeouts(math.MaxInt64, 0),
		"WithMaxTTL(0)":                redlock.WithMaxTTL(0),
		"WithMaxTTL(-1s)":              redlock.WithMaxTTL(-time.Second),
		"WithMaxTTL(2ms)":              redlock.WithMaxTTL(2 * time.Millisecond),
		"WithMaxTTL(MaxTTL+1ns)":       redlock.WithMaxTTL(redlock.MaxTTL + time.Nanosecond),
		"WithMaxTTL(MinInt64)":         redlock.WithMaxTTL(math.MinInt64),
	}
	if math.MaxInt > math.MaxUint32 { // a retry count that does not fit in 32 bits
		bad["WithRetry(MaxInt, 0)"] = redlock.WithRetry(math.MaxInt, 0)
	}
	for name, opt := range bad {
		_, err := redlock.New(sharedNodes, opt)
		wantIs(t, "New with "+name, err, redlock.ErrInvalidArgument)
	}
	// Valid edge cases: zero retries and delay, zero drift, a sub-millisecond connect timeout
	// (rounded up to 1 ms), the derived node timeout, the smallest and largest maximum TTLs
	// (2.5 ms is rounded up to 3 ms), quarantine either way.
	for _, opt := range []redlock.Option{redlock.WithRetry(0, 0), redlock.WithDriftFactor(0),
		redlock.WithTimeouts(time.Nanosecond, 0), redlock.WithMaxTTL(2500 * time.Microsecond),
		redlock.WithMaxTTL(redlock.MaxTTL), redlock.WithRestartQuarantine(true),
		redlock.WithRestartQuarantine(false), nil} {
		m, err := redlock.New(sharedNodes, opt)
		wantNoErr(t, "New with a valid edge-case option", err)
		m.Close()
	}

	// Acquisition: TTLs out of range, in Go (≤ 0, too big) and in the library (1 and 2 ms).
	m := newManager(t, sharedNodes, redlock.WithRetry(0, 0))
	res := uniq(t)
	acquirers := map[string]func(string, time.Duration, ...redlock.LockOption) (*redlock.Lock, error){
		"Acquire": m.Acquire,
		"Lock":    m.Lock,
		"TryLock": m.TryLock,
		"LockWait": func(r string, ttl time.Duration, opts ...redlock.LockOption) (*redlock.Lock, error) {
			return m.LockWait(r, ttl, time.Second, opts...)
		},
	}
	badTTLs := []time.Duration{0, -time.Second, math.MinInt64, redlock.MaxTTL + time.Millisecond,
		redlock.MaxTTL + time.Nanosecond, math.MaxInt64, time.Nanosecond, time.Millisecond,
		2 * time.Millisecond, 1500 * time.Microsecond,
		redlock.DefaultMaxTTL + time.Nanosecond, redlock.MaxTTL} // above the manager's maximum TTL
	for name, acquire := range acquirers {
		for _, ttl := range badTTLs {
			l, err := acquire(res, ttl)
			if l != nil {
				t.Fatalf("%s(ttl %v) returned a lock", name, ttl)
			}
			wantIs(t, fmt.Sprintf("%s(ttl %v)", name, ttl), err, redlock.ErrInvalidArgument)
			if !strings.HasPrefix(err.Error(), "redlock: invalid input: ") || !strings.Contains(err.Error(), "TTL") {
				t.Fatalf("%s(ttl %v): message %q does not name the TTL", name, ttl, err)
			}
		}
		for _, r := range []string{"", strings.Repeat("r", redlock.MaxResourceLen+1)} {
			_, err := acquire(r, time.Second)
			wantIs(t, fmt.Sprintf("%s(%d-byte resource)", name, len(r)), err, redlock.ErrInvalidArgument)
			_, err = acquire(r, time.Second, redlock.Fenced())
			wantIs(t, fmt.Sprintf("%s(%d-byte resource, Fenced)", name, len(r)), err, redlock.ErrInvalidArgument)
		}
		// Lock options out of range, or that need AutoRenew without it: nothing is sent.
		for what, opts := range map[string][]redlock.LockOption{
			"AutoRenew(-1ms)":           {redlock.AutoRenew(-time.Millisecond)},
			"AutoRenew(MaxTTL+1ms)":     {redlock.Fenced(), redlock.AutoRenew(redlock.MaxTTL + time.Millisecond)},
			"OnLost without AutoRenew":  {redlock.OnLost(func(*redlock.Lock) {})},
			"MaxExtensions without one": {redlock.Fenced(), redlock.MaxExtensions(3)},
		} {
			l, err := acquire(res, time.Second, opts...)
			if l != nil {
				t.Fatalf("%s(%s) returned a lock", name, what)
			}
			wantIs(t, fmt.Sprintf("%s(%s)", name, what), err, redlock.ErrInvalidArgument)
		}
		if n := present(t, sharedNodes, res); n != 0 {
			t.Fatalf("%s: bad options reached the nodes (the key is on %d)", name, n)
		}
	}
	for _, wait := range []time.Duration{-time.Nanosecond, -time.Second, redlock.MaxTTL + time.Millisecond} {
		_, err := m.LockWait(res, time.Second, wait)
		wantIs(t, fmt.Sprintf("LockWait(wait %v)", wait), err, redlock.ErrInvalidArgument)
	}
	if n := present(t, sharedNodes, res); n != 0 {
		t.Fatal("an invalid call reached a node")
	}

	// Extend with a bad TTL is refused without touching the lock.
	l, err := m.Lock(res, 10*time.Second)
	wantNoErr(t, "Lock", err)
	defer l.Free()
	for _, ttl := range []time.Duration{0, -time.Millisecond, redlock.MaxTTL + time.Millisecond, 2 * time.Millisecond,
		redlock.DefaultMaxTTL + time.Millisecond} {
		wantIs(t, fmt.Sprintf("Extend(%v)", ttl), l.Extend(ttl), redlock.ErrInvalidArgument)
	}
	if v := l.Validity(); v < 8*time.Second {
		t.Fatalf("Validity() = %v after refused extensions", v)
	}
	wantNoErr(t, "Unlock", l.Unlock())

	// nil receivers.
	var nilM *redlock.Manager
	_, err = nilM.Lock(res, time.Second)
	wantIs(t, "nil Manager Lock", err, redlock.ErrNullArgument)
	if nilM.Close() != nil || nilM.NodeCount() != 0 || nilM.Quorum() != 0 {
		t.Fatal("nil Manager accessors")
	}
	_, err = nilM.NodeStates()
	wantIs(t, "nil Manager NodeStates", err, redlock.ErrNullArgument)
	_, err = nilM.Metrics()
	wantIs(t, "nil Manager Metrics", err, redlock.ErrNullArgument)
	var nilL *redlock.Lock
	wantIs(t, "nil Lock Unlock", nilL.Unlock(), redlock.ErrNullArgument)
	wantIs(t, "nil Lock Extend", nilL.Extend(time.Second), redlock.ErrNullArgument)
	nilL.Free()
	if nilL.Validity() != 0 || nilL.Valid() || nilL.Token() != "" || nilL.NodeOutcomes() != nil {
		t.Fatal("nil Lock accessors")
	}
}

func TestCloseWithLiveLocks(t *testing.T) {
	t.Parallel()
	m, err := redlock.New(sharedNodes, testTimeouts)
	wantNoErr(t, "New", err)
	res := uniq(t)
	l, err := m.Lock(res, 10*time.Second)
	wantNoErr(t, "Lock", err)
	lFreedFirst, err := m.Lock(res+"/b", 10*time.Second)
	wantNoErr(t, "Lock", err)
	wantNoErr(t, "Unlock", lFreedFirst.Unlock())
	lFreedFirst.Free() // a lease freed before its manager

	wantNoErr(t, "Close", m.Close())
	wantNoErr(t, "second Close", m.Close())
	if m.NodeCount() != 3 || m.Quorum() != 2 {
		t.Fatal("NodeCount/Quorum changed after Close")
	}
	for name, call := range map[string]func() (*redlock.Lock, error){
		"Lock":     func() (*redlock.Lock, error) { return m.Lock(res+"/c", time.Second) },
		"TryLock":  func() (*redlock.Lock, error) { return m.TryLock(res+"/c", time.Second) },
		"LockWait": func() (*redlock.Lock, error) { return m.LockWait(res+"/c", time.Second, time.Second) },
	} {
		l, err := call()
		if l != nil || !errors.Is(err, redlock.ErrClosed) {
			t.Fatalf("%s after Close: %v, %v; want ErrClosed", name, l, err)
		}
	}
	if states, err := m.NodeStates(); states != nil || !errors.Is(err, redlock.ErrClosed) {
		t.Fatalf("NodeStates after Close: %v, %v; want ErrClosed", states, err)
	}
	if text, err := m.Metrics(); text != "" || !errors.Is(err, redlock.ErrClosed) {
		t.Fatalf("Metrics after Close: %q, %v; want ErrClosed", text, err)
	}

	// The lock outlives its manager: it can be read, extended and released.
	if !l.Valid() || l.Validity() < 8*time.Second {
		t.Fatalf("Validity() = %v after the manager was closed", l.Validity())
	}
	wantNoErr(t, "Extend after Close", l.Extend(20*time.Second))
	if pttl(t, sharedNodes[0], res) < 15000 && pttl(t, sharedNodes[1], res) < 15000 {
		t.Fatal("Extend after Close did not reach the nodes")
	}
	wantNoErr(t, "Unlock after Close", l.Unlock())
	if !eventually(settle, func() bool { return present(t, sharedNodes, res) == 0 }) {
		t.Fatal("Unlock after Close left the key")
	}
	l.Free()
}

// Close while other goroutines are locking and unlocking: no crash, no race, and every call
// either works or returns ErrClosed (or, for the contended resource, ErrNotAcquired).
func TestCloseDuringUse(t *testing.T) {
	t.Parallel()
	m, err := redlock.New(sharedNodes, testTimeouts, redlock.WithRetry(0, 0))
	wantNoErr(t, "New", err)
	res := uniq(t)
	var (
		wg     sync.WaitGroup
		ops    atomic.Int32
		closed atomic.Int32
		errMu  sync.Mutex
		errs   []error
	)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				l, err := m.TryLock(fmt.Sprintf("%s/%d", res, g), 5*time.Second)
				if errors.Is(err, redlock.ErrClosed) {
					closed.Add(1)
					return
				}
				if err != nil {
					errMu.Lock()
					errs = append(errs, err)
					errMu.Unlock()
					return
				}
				ops.Add(1)
				if err := l.Unlock(); err != nil { // may run after Close: must still work
					errMu.Lock()
					errs = append(errs, fmt.Errorf("Unlock: %w", err))
					errMu.Unlock()
				}
				l.Free()
			}
		}(g)
	}
	eventually(5*time.Second, func() bool { return ops.Load() >= 16 })
	wantNoErr(t, "Close", m.Close())
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	if ops.Load() == 0 {
		t.Fatal("no lock was taken before Close")
	}
	t.Logf("%d locks taken; %d goroutines stopped by ErrClosed", ops.Load(), closed.Load())
	for g := 0; g < 8; g++ {
		if n := present(t, sharedNodes, fmt.Sprintf("%s/%d", res, g)); n != 0 {
			t.Fatalf("goroutine %d's key is left on %d nodes", g, n)
		}
	}
}

// Free while other goroutines use the Lock; Free never unlocks.
func TestFreeDuringUse(t *testing.T) {
	t.Parallel()
	m := newManager(t, sharedNodes)
	res := uniq(t)
	l, err := m.Lock(res, 10*time.Second)
	wantNoErr(t, "Lock", err)
	token, value := l.Token(), l.Value()
	var (
		wg    sync.WaitGroup
		calls atomic.Int32
		errMu sync.Mutex
		errs  []error
	)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				_ = l.Validity()
				_ = l.Valid()
				_ = l.String()
				if l.Token() != token {
					errMu.Lock()
					errs = append(errs, errors.New("token changed"))
					errMu.Unlock()
				}
				if err := l.Extend(10 * time.Second); err != nil && !errors.Is(err, redlock.ErrClosed) {
					errMu.Lock()
					errs = append(errs, err)
					errMu.Unlock()
				}
				calls.Add(1)
			}
		}()
	}
	eventually(5*time.Second, func() bool { return calls.Load() >= 20 })
	l.Free()
	l.Free()
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	wantIs(t, "Unlock after Free", l.Unlock(), redlock.ErrClosed)
	wantIs(t, "Extend after Free", l.Extend(time.Second), redlock.ErrClosed)
	if l.Validity() != 0 || l.Valid() {
		t.Fatal("a freed Lock reads as valid")
	}
	if l.Token() != token || l.Value() != value || l.Resource() != res || l.Granted() < 2 || len(l.NodeOutcomes()) != 3 {
		t.Fatal("a freed Lock forgot its token, value, resource or acquisition report")
	}
	// Free did not unlock: the nodes still hold the value. Clean up by hand.
	if n := holding(t, sharedNodes, res, value); n < 2 {
		t.Fatalf("Free unlocked the lock: only %d nodes hold the token", n)
	}
	for _, u := range sharedNodes {
		if _, err := respDo(addrOf(u), "DEL", lockKey(res)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	sentinels := map[redlock.Status]error{
		redlock.StatusNotAcquired:     redlock.ErrNotAcquired,
		redlock.StatusNotHeld:         redlock.ErrNotHeld,
		redlock.StatusUnavailable:     redlock.ErrUnavailable,
		redlock.StatusAuth:            redlock.ErrAuth,
		redlock.StatusCancelled:       redlock.ErrCancelled,
		redlock.StatusInvalidArgument: redlock.ErrInvalidArgument,
		redlock.StatusNullArgument:    redlock.ErrNullArgument,
		redlock.StatusInvalidHandle:   redlock.ErrInvalidHandle,
		redlock.StatusInternal:        redlock.ErrInternal,
		redlock.StatusPanic:           redlock.ErrPanic,
	}
	for st := range sentinels {
		err := fmt.Errorf("wrapped: %w", &redlock.Error{Status: st, Message: "details"})
		for st2, sentinel := range sentinels {
			// An auth error is also unavailable (a quorum was out of reach).
			want := st == st2 || (st == redlock.StatusAuth && st2 == redlock.StatusUnavailable)
			if got := errors.Is(err, sentinel); got != want {
				t.Fatalf("errors.Is(%v error, %v sentinel) = %v", st, st2, got)
			}
		}
		if errors.Is(err, redlock.ErrClosed) {
			t.Fatalf("a %v error matches ErrClosed", st)
		}
		var e *redlock.Error
		if !errors.As(err, &e) || e.Status != st || e.Message != "details" {
			t.Fatalf("errors.As on %v", err)
		}
	}
	if errors.Is(redlock.ErrClosed, redlock.ErrNotHeld) {
		t.Fatal("ErrClosed matches ErrNotHeld")
	}
	for st, want := range map[redlock.Status]string{
		redlock.StatusOK: "ok", redlock.StatusNotAcquired: "not acquired", redlock.StatusNotHeld: "not held",
		redlock.StatusUnavailable: "unavailable", redlock.StatusAuth: "authentication failed",
		redlock.StatusInvalidArgument: "invalid argument", redlock.StatusNullArgument: "null argument",
		redlock.StatusInternal: "internal error", redlock.StatusPanic: "panic",
		redlock.StatusCancelled: "cancelled", redlock.StatusInvalidHandle: "invalid handle",
		redlock.Status(6): "unknown status", redlock.Status(13): "unknown status", redlock.Status(-1): "unknown status",
	} {
		if got := st.String(); got != want {
			t.Fatalf("Status(%d).String() = %q, want %q", int32(st), got, want)
		}
	}
	if got := (&redlock.Error{Status: redlock.StatusNotHeld, Message: "not held: gone"}).Error(); got != "redlock: not held: gone" {
		t.Fatalf("Error() = %q", got)
	}
	if got := redlock.ErrUnavailable.Error(); got != "redlock: unavailable" {
		t.Fatalf("Error() = %q", got)
	}
	for o, want := range map[redlock.NodeOutcome]string{
		redlock.NodeSuccess: "success", redlock.NodeRejected: "rejected", redlock.NodePending: "pending",
		redlock.NodeTimeout: "timeout", redlock.NodeUnreachable: "unreachable", redlock.NodeBackoff: "backoff",
		redlock.NodeServerError: "server error", redlock.NodeProtocol: "protocol error",
		redlock.NodeQuarantined: "quarantined", redlock.NodeDuplicate: "duplicate",
		redlock.NodeOutcome(42): "NodeOutcome(42)",
	} {
		if got := o.String(); got != want {
			t.Fatalf("NodeOutcome(%d).String() = %q, want %q", int32(o), got, want)
		}
	}
	if redlock.NodeSuccess != 0 || redlock.NodeProtocol != 7 || redlock.NodeQuarantined != 8 || redlock.StatusPanic != 99 ||
		redlock.StatusAuth != 4 || redlock.StatusCancelled != 5 {
		t.Fatal("the stable numbers of the C ABI changed")
	}
	for r, want := range map[redlock.QuarantineReason]string{
		redlock.QuarantineNone: "none", redlock.QuarantineNoMarker: "no marker",
		redlock.QuarantineStaleMarker: "stale marker", redlock.QuarantineRestartSeen: "restart seen",
		redlock.QuarantineYoung: "young", redlock.QuarantineUndecided: "undecided",
		redlock.QuarantinePromoted: "promoted", redlock.QuarantineReason(42): "QuarantineReason(42)",
	} {
		if got := r.String(); got != want {
			t.Fatalf("QuarantineReason(%d).String() = %q, want %q", int32(r), got, want)
		}
	}
	for i, r := range []redlock.QuarantineReason{redlock.QuarantineNone, redlock.QuarantineNoMarker,
		redlock.QuarantineStaleMarker, redlock.QuarantineRestartSeen, redlock.QuarantineYoung,
		redlock.QuarantineUndecided, redlock.QuarantinePromoted} {
		if int(r) != i {
			t.Fatalf("QuarantineReason %v is %d, want %d: the stable numbers of the C ABI changed", r, int32(r), i)
		}
	}
}

// Two of three nodes refuse the credentials (these nodes need no password, so AUTH with one
// fails): without them a quorum is out of reach, which is ErrAuth, not a dead cluster.
func TestCredentialsRefusedByAQuorum(t *testing.T) {
	t.Parallel()
	nodes := []string{sharedNodes[0]}
	for _, u := range sharedNodes[1:3] {
		nodes = append(nodes, "redis://:wrong-pw@"+addrOf(u))
	}
	m, err := redlock.New(nodes, redlock.WithRetry(1, 5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, err := m.Lock(uniq(t), 5*time.Second)
	if l != nil {
		t.Fatal("granted")
	}
	wantIs(t, "Lock", err, redlock.ErrAuth)
	wantIs(t, "Lock", err, redlock.ErrUnavailable) // handled wherever ErrUnavailable is
	var e *redlock.Error
	if !errors.As(err, &e) || e.Status != redlock.StatusAuth {
		t.Fatalf("Lock: %v", err)
	}
	if !strings.Contains(e.Message, "authentication failed: ") || strings.Contains(e.Message, "wrong-pw") {
		t.Fatalf("message: %q", e.Message)
	}
}
