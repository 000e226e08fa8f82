package redlock_test

// Leader election (Manager.Election, Election.Campaign, Leader, WaitChange, Observe; the
// Leadership's Term, Value, Proclaim, Resign, Lost, IsLost, WaitLost) against real
// redis-server nodes: terms that increase from one leader to the next, a waiting candidate
// woken by the resignation, an observer that sees every change in increasing term order, a
// waiting campaign ended by its context leaving nothing held, a lost leadership told, bad
// input refused with ErrInvalidArgument. Every wait is bounded generously; no test asserts
// how long something took beyond bounds far from what a busy two-core machine needs.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	redlock "github.com/redlock-quorum/redlock/bindings/go"
)

// electLimit bounds every wait of these tests (a hang), far above what any step needs.
const electLimit = 30 * time.Second

// electKey is the election's key, on which its leadership is held (and its resignation
// announced).
func electKey(name string) string { return "redlock-elect:" + lockKey(name) }

// leaderResult is what a Campaign running in a goroutine returned, and when.
type leaderResult struct {
	ld  *redlock.Leadership
	err error
	at  time.Time
}

func campaignAsync(e *redlock.Election, ctx context.Context, value string, opts ...redlock.LockOption) <-chan leaderResult {
	ch := make(chan leaderResult, 1)
	go func() {
		ld, err := e.Campaign(ctx, value, opts...)
		ch <- leaderResult{ld, err, time.Now()}
	}()
	return ch
}

// campaignWaiting returns once m's campaign waits for a resignation: it has retried (so it has
// subscribed and made the attempt that follows), plus 200 ms; the campaign has not returned.
func campaignWaiting(t *testing.T, m *redlock.Manager, ch <-chan leaderResult) {
	t.Helper()
	if !eventually(electLimit, func() bool { return metric(t, m, "redlock_acquire_retries_total") >= 1 }) {
		t.Fatal("the candidate never retried")
	}
	time.Sleep(200 * time.Millisecond)
	select {
	case r := <-ch:
		t.Fatalf("the candidate returned while another led: %v, %v", r.ld, r.err)
	default:
	}
}

func newElection(t *testing.T, m *redlock.Manager, name string, ttl time.Duration) *redlock.Election {
	t.Helper()
	e, err := m.Election(name, ttl)
	wantNoErr(t, "Election", err)
	return e
}

// Campaign, Leader, Proclaim and Resign, three leaders one after another: each term above the
// last, the leader read with its value, a rival refused while one leads, none after a
// resignation.
func TestElectionCampaignLeaderProclaimResign(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := newManager(t, sharedNodes)
	name := uniq(t)
	e := newElection(t, m, name, 10*time.Second)
	if e.Name() != name || e.TTL() != 10*time.Second || !strings.Contains(e.String(), name) {
		t.Fatalf("Name, TTL, String: %q %v %q", e.Name(), e.TTL(), e.String())
	}
	if l, err := e.Leader(ctx); err != nil || l != nil {
		t.Fatalf("Leader before any campaign: %+v, %v", l, err)
	}
	var last uint64
	for _, value := range []string{"node-1", "node-2", "node-3"} {
		ld, err := e.Campaign(ctx, value, redlock.NoWait())
		wantNoErr(t, "Campaign "+value, err)
		if ld.Term() <= last || ld.Term() != ld.Lock().FencingToken() || ld.Value() != value || ld.Election() != name {
			t.Fatalf("leadership after term %d: term %d, value %q, election %q", last, ld.Term(), ld.Value(), ld.Election())
		}
		last = ld.Term()
		if ld.IsLost() || ld.Validity() <= 0 || !ld.Lock().Renewing() || ld.WaitLost(time.Millisecond) {
			t.Fatalf("a new leadership: lost %v, validity %v, renewing %v", ld.IsLost(), ld.Validity(), ld.Lock().Renewing())
		}
		l, err := e.Leader(ctx)
		wantNoErr(t, "Leader", err)
		if l == nil || l.Term != ld.Term() || l.Value != value || l.Validity <= 0 || l.Validity > 10*time.Second {
			t.Fatalf("Leader: %+v, want term %d value %q", l, ld.Term(), value)
		}
		wantNoErr(t, "Proclaim", ld.Proclaim("moved\x00"+value))
		if l, err := e.Leader(ctx); err != nil || l == nil || l.Term != ld.Term() || l.Value != "moved\x00"+value ||
			ld.Value() != l.Value {
			t.Fatalf("Leader after Proclaim: %+v, %v", l, err)
		}
		_, err = e.Campaign(ctx, "rival", redlock.NoWait())
		wantIs(t, "a rival's Campaign", err, redlock.ErrNotAcquired)

		wantNoErr(t, "Resign", ld.Resign())
		if !ld.IsLost() || !ld.WaitLost(electLimit) || ld.Validity() != 0 {
			t.Fatalf("after Resign: lost %v, validity %v", ld.IsLost(), ld.Validity())
		}
		wantIs(t, "Resign again", ld.Resign(), redlock.ErrNotHeld)
		wantIs(t, "Proclaim after Resign", ld.Proclaim("late"), redlock.ErrNotHeld)
		ld.Free()
		if err := ld.Proclaim("freed"); err != redlock.ErrClosed {
			t.Fatalf("Proclaim after Free: %v", err)
		}
		if l, err := e.Leader(ctx); err != nil || l != nil {
			t.Fatalf("Leader after the resignation: %+v, %v", l, err)
		}
	}
	if n := keyPresent(t, sharedNodes, electKey(name)); n != 0 {
		t.Fatalf("the election's key is on %d nodes after the last resignation", n)
	}
}

// A candidate that waits is woken by the leader's resignation and leads in a higher term.
func TestElectionWaitingCandidateTakesOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	name := uniq(t)
	first := newElection(t, newManager(t, sharedNodes), name, 30*time.Second)
	m2 := newManager(t, sharedNodes, redlock.WithRetry(3, 5*time.Second)) // woken, not polling
	second := newElection(t, m2, name, 30*time.Second)

	ld1, err := first.Campaign(ctx, "first")
	wantNoErr(t, "the first Campaign", err)
	defer ld1.Free()
	ch := campaignAsync(second, ctx, "second")
	campaignWaiting(t, m2, ch)
	wantNoErr(t, "Resign", ld1.Resign())
	r := <-waitLeader(t, ch)
	wantNoErr(t, "the second Campaign", r.err)
	defer r.ld.Free()
	if r.ld.Term() <= ld1.Term() {
		t.Fatalf("the second leader's term %d is not above the first's %d", r.ld.Term(), ld1.Term())
	}
	l, err := first.Leader(ctx)
	if err != nil || l == nil || l.Term != r.ld.Term() || l.Value != "second" {
		t.Fatalf("Leader: %+v, %v", l, err)
	}
	wantNoErr(t, "Resign", r.ld.Resign())
}

// waitLeader passes on a Campaign's result, failing the test if none comes in electLimit.
func waitLeader(t *testing.T, ch <-chan leaderResult) <-chan leaderResult {
	t.Helper()
	select {
	case r := <-ch:
		out := make(chan leaderResult, 1)
		out <- r
		return out
	case <-time.After(electLimit):
		t.Fatal("the waiting candidate was never woken")
		return nil
	}
}

// Observe sends every leader of several changes, in increasing term order and never twice,
// and closes its channel when its context ends; WaitChange returns the next leader, and ends
// with its context.
func TestElectionObserve(t *testing.T) {
	t.Parallel()
	name := uniq(t)
	e := newElection(t, newManager(t, sharedNodes), name, 10*time.Second)
	oe := newElection(t, newManager(t, sharedNodes), name, 10*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leaders := oe.Observe(ctx)

	var want []redlock.Leader
	var mu sync.Mutex
	var seen []redlock.Leader
	done := make(chan struct{})
	go func() {
		defer close(done)
		for l := range leaders {
			mu.Lock()
			seen = append(seen, l)
			mu.Unlock()
		}
	}()
	seenCount := func() int { mu.Lock(); defer mu.Unlock(); return len(seen) }
	for i, value := range []string{"a", "b", "c", "d"} {
		ld, err := e.Campaign(context.Background(), value, redlock.Wait(electLimit))
		wantNoErr(t, "Campaign", err)
		want = append(want, redlock.Leader{Term: ld.Term(), Value: value})
		// Until the observer has it: each change is then seen, none skipped.
		if !eventually(electLimit, func() bool { return seenCount() > i }) {
			t.Fatalf("the observer never saw leader %q (term %d)", value, ld.Term())
		}
		wantNoErr(t, "Resign", ld.Resign())
		ld.Free()
	}
	cancel()
	select {
	case <-done:
	case <-time.After(electLimit):
		t.Fatal("Observe's channel was not closed after its context ended")
	}
	if len(seen) != len(want) {
		t.Fatalf("observed %+v, want %+v", seen, want)
	}
	for i := range seen {
		if seen[i].Term != want[i].Term || seen[i].Value != want[i].Value || (i > 0 && seen[i].Term <= seen[i-1].Term) {
			t.Fatalf("observed %+v, want %+v", seen, want)
		}
	}

	// WaitChange: the next leader; with an ended context, the context's error.
	ch := make(chan *redlock.Leader, 1)
	go func() {
		l, err := e.WaitChange(context.Background(), seen[len(seen)-1].Term)
		if err != nil {
			t.Errorf("WaitChange: %v", err)
		}
		ch <- l
	}()
	ld, err := e.Campaign(context.Background(), "e", redlock.Wait(electLimit))
	wantNoErr(t, "Campaign", err)
	defer ld.Free()
	select {
	case l := <-ch:
		if l == nil || l.Term != ld.Term() || l.Value != "e" {
			t.Fatalf("WaitChange: %+v, want term %d", l, ld.Term())
		}
	case <-time.After(electLimit):
		t.Fatal("WaitChange never returned the new leader")
	}
	dctx, dcancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer dcancel()
	_, err = e.WaitChange(dctx, ld.Term())
	wantIs(t, "WaitChange past its deadline", err, redlock.ErrNotAcquired)
	wantIs(t, "WaitChange past its deadline", err, context.DeadlineExceeded)
	wantNoErr(t, "Resign", ld.Resign())
}

// A context cancelled while Campaign waits ends it promptly with ErrCancelled, and nothing of
// the waiter is left on the nodes; a deadline gives ErrNotAcquired; a context ended before
// sends nothing.
func TestElectionCampaignContextCancel(t *testing.T) {
	t.Parallel()
	name := uniq(t)
	holder := newElection(t, newManager(t, sharedNodes), name, 30*time.Second)
	m := newManager(t, sharedNodes, redlock.WithRetry(3, 5*time.Second))
	e := newElection(t, m, name, 10*time.Second)

	ended, cancel0 := context.WithCancel(context.Background())
	cancel0()
	_, err := e.Campaign(ended, "waiter")
	wantIs(t, "Campaign(cancelled)", err, redlock.ErrCancelled)
	wantIs(t, "Campaign(cancelled)", err, context.Canceled)
	if _, err := e.Leader(ended); !errors.Is(err, redlock.ErrCancelled) {
		t.Fatalf("Leader(cancelled): %v", err)
	}
	if a := metric(t, m, "redlock_acquire_attempts_total"); a != 0 {
		t.Fatalf("%d attempts for a context that had ended", a)
	}

	held, err := holder.Campaign(context.Background(), "holder")
	wantNoErr(t, "the holder's Campaign", err)
	defer held.Free()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := campaignAsync(e, ctx, "waiter")
	campaignWaiting(t, m, ch)
	cancelled := time.Now()
	cancel()
	r := <-waitLeader(t, ch)
	t.Logf("Campaign returned %v after its context was cancelled: %v", r.at.Sub(cancelled), r.err)
	if r.ld != nil {
		t.Fatal("Campaign returned a leadership while another led")
	}
	wantIs(t, "Campaign", r.err, redlock.ErrCancelled)
	wantIs(t, "Campaign", r.err, context.Canceled)
	if latency := r.at.Sub(cancelled); latency > 5*time.Second {
		t.Fatalf("Campaign returned %v after the cancellation, want well under the holder's 30 s", latency)
	}
	if n := metric(t, m, `redlock_acquire_total{result="cancelled"}`); n != 1 {
		t.Fatalf(`redlock_acquire_total{result="cancelled"} is %d, want 1`, n)
	}

	dctx, dcancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer dcancel()
	_, err = e.Campaign(dctx, "waiter")
	wantIs(t, "Campaign past its deadline", err, redlock.ErrNotAcquired)
	wantIs(t, "Campaign past its deadline", err, context.DeadlineExceeded)

	// Only the holder's key is on the nodes, and it still leads.
	holds := func() bool {
		for _, u := range sharedNodes {
			if v, err := respDo(addrOf(u), "GET", electKey(name)); err != nil || v != held.Lock().Value() {
				return false
			}
		}
		return true
	}
	if !eventually(electLimit, holds) {
		t.Fatal("the election's key is not the holder's on every node")
	}
	l, err := e.Leader(context.Background())
	if err != nil || l == nil || l.Term != held.Term() || l.Value != "holder" {
		t.Fatalf("Leader: %+v, %v", l, err)
	}
	wantNoErr(t, "Resign", held.Resign())
	if n := keyPresent(t, sharedNodes, electKey(name)); n != 0 {
		t.Fatalf("the election's key is on %d nodes after the holder resigned", n)
	}
}

// A leadership taken over on every node behind its back is told: Lost is closed, the OnLost
// callback runs, IsLost and WaitLost say so.
func TestElectionLost(t *testing.T) {
	t.Parallel()
	name := uniq(t)
	e := newElection(t, newManager(t, sharedNodes), name, time.Second)
	told := make(chan *redlock.Lock, 1)
	ld, err := e.Campaign(context.Background(), "a", redlock.AutoRenew(0),
		redlock.OnLost(func(l *redlock.Lock) { told <- l }))
	wantNoErr(t, "Campaign", err)
	defer ld.Free()
	for _, u := range sharedNodes {
		if _, err := respDo(addrOf(u), "SET", electKey(name), "intruder", "PX", "60000"); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-ld.Lost():
	case <-time.After(electLimit):
		t.Fatal("the leadership taken over was never reported lost")
	}
	select {
	case l := <-told:
		if l != ld.Lock() {
			t.Fatal("OnLost got another lock")
		}
	case <-time.After(electLimit):
		t.Fatal("OnLost was never called")
	}
	if !ld.IsLost() || !ld.WaitLost(time.Millisecond) || ld.LostReason() == "" || ld.Validity() != 0 {
		t.Fatalf("lost: %v, reason %q, validity %v", ld.IsLost(), ld.LostReason(), ld.Validity())
	}
	wantIs(t, "Proclaim after the loss", ld.Proclaim("b"), redlock.ErrNotHeld)
	for _, u := range sharedNodes {
		if _, err := respDo(addrOf(u), "DEL", electKey(name)); err != nil {
			t.Fatal(err)
		}
	}
}

// Bad input is ErrInvalidArgument: checked in Go (nothing sent), or by the library for the
// options a leadership cannot take, with its message.
func TestElectionBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := newManager(t, sharedNodes)
	name := uniq(t)
	e := newElection(t, m, name, 10*time.Second)
	long := strings.Repeat("x", redlock.MaxLeaderValue+1)
	_, err := e.Campaign(ctx, long)
	wantIs(t, "Campaign with a value too long", err, redlock.ErrInvalidArgument)
	if !strings.Contains(err.Error(), "at most 65536 bytes, got 65537") {
		t.Fatalf("message: %v", err)
	}
	for _, bad := range []struct {
		what string
		opt  redlock.LockOption
	}{
		{"WithOwner", redlock.WithOwner("me")},
		{"WithShared", redlock.WithShared()},
		{"WithFair", redlock.WithFair()},
	} {
		_, err := e.Campaign(ctx, "v", bad.opt)
		wantIs(t, "Campaign with "+bad.what, err, redlock.ErrInvalidArgument)
		if !strings.Contains(err.Error(), "neither reentrant, shared nor fair") {
			t.Fatalf("Campaign with %s: %v", bad.what, err)
		}
	}
	var noCtx context.Context // a nil context is refused
	if _, err := e.Campaign(noCtx, "v"); !errors.Is(err, redlock.ErrInvalidArgument) {
		t.Fatalf("Campaign(nil ctx): %v", err)
	}
	if _, err := m.Election("", time.Second); !errors.Is(err, redlock.ErrInvalidArgument) {
		t.Fatalf("Election(\"\"): %v", err)
	}
	if _, err := m.Election(strings.Repeat("n", redlock.MaxResourceLen+1), time.Second); !errors.Is(err, redlock.ErrInvalidArgument) {
		t.Fatalf("Election(a long name): %v", err)
	}
	if _, err := m.Election(name, 0); !errors.Is(err, redlock.ErrInvalidArgument) {
		t.Fatalf("Election(ttl 0): %v", err)
	}
	tooLong := newElection(t, m, name, time.Hour) // above the manager's maximum TTL
	if _, err := tooLong.Campaign(ctx, "v"); !errors.Is(err, redlock.ErrInvalidArgument) {
		t.Fatalf("Campaign with a TTL above the maximum: %v", err)
	}
	if a := metric(t, m, "redlock_acquire_attempts_total"); a != 0 {
		t.Fatalf("%d attempts for refused input", a)
	}
	ld, err := e.Campaign(ctx, "v", redlock.NoWait())
	wantNoErr(t, "Campaign", err)
	defer ld.Free()
	wantIs(t, "Proclaim of a value too long", ld.Proclaim(long), redlock.ErrInvalidArgument)
	wantNoErr(t, "Proclaim at the limit", ld.Proclaim(long[1:]))
	if l, err := e.Leader(ctx); err != nil || l == nil || len(l.Value) != redlock.MaxLeaderValue {
		t.Fatalf("Leader after a proclamation at the limit: %v", err)
	}
	wantNoErr(t, "Resign", ld.Resign())

	var nilElection *redlock.Election
	if _, err := nilElection.Campaign(ctx, "v"); !errors.Is(err, redlock.ErrNullArgument) {
		t.Fatalf("a nil Election: %v", err)
	}
	if _, ok := <-nilElection.Observe(ctx); ok {
		t.Fatal("a nil Election's Observe sent a leader")
	}
	closed, err := redlock.New(sharedNodes, testTimeouts)
	wantNoErr(t, "New", err)
	ce := newElection(t, closed, name, time.Second)
	closed.Close()
	if _, err := ce.Campaign(ctx, "v"); err != redlock.ErrClosed {
		t.Fatalf("Campaign after Close: %v", err)
	}
	if _, err := ce.Leader(ctx); err != redlock.ErrClosed {
		t.Fatalf("Leader after Close: %v", err)
	}
	if _, ok := <-ce.Observe(ctx); ok {
		t.Fatal("Observe after Close sent a leader")
	}
}
