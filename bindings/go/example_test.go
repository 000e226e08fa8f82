package redlock_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	redlock "github.com/redlock-quorum/redlock/bindings/go"
)

// The examples that need Redis read the node URLs from $REDLOCK_NODES (comma-separated), which
// the test suite's TestMain sets to the servers it starts; in a program they would come from
// its configuration, e.g. "redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379".
//
// Restart quarantine is on, as it is by default: those servers were started moments before,
// empty, and a brand-new cluster is trusted at once.

// Acquire, extend and release a lock, and match errors with errors.Is.
func Example() {
	nodes := strings.Split(os.Getenv("REDLOCK_NODES"), ",")
	m, err := redlock.New(nodes,
		redlock.WithRetry(3, 200*time.Millisecond),
		redlock.WithTimeouts(time.Second, 500*time.Millisecond))
	if err != nil {
		fmt.Println("New:", err)
		return
	}
	defer m.Close()

	l, err := m.Lock("example:orders:42", 10*time.Second)
	switch {
	case errors.Is(err, redlock.ErrNotAcquired):
		fmt.Println("someone else holds it")
		return
	case err != nil:
		fmt.Println("Lock:", err)
		return
	}
	defer l.Free()
	fmt.Println("locked", l.Resource(), "valid:", l.Valid())

	// ... work, and if it takes longer than planned:
	if err := l.Extend(10 * time.Second); err != nil {
		fmt.Println("Extend:", err)
	}
	fmt.Println("unlock:", l.Unlock())
	fmt.Println("unlock again is ErrNotHeld:", errors.Is(l.Unlock(), redlock.ErrNotHeld))
	// Output:
	// locked example:orders:42 valid: true
	// unlock: <nil>
	// unlock again is ErrNotHeld: true
}

// New checks its arguments but makes no connection, so this runs without any Redis server.
func ExampleNew() {
	m, err := redlock.New([]string{
		"redis://127.0.0.1:7001",
		"redis://127.0.0.1:7002",
		"redis://user:secret@127.0.0.1:7003/0",
	}, redlock.WithRetry(3, 200*time.Millisecond), redlock.WithDriftFactor(0.01))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	fmt.Println(m.NodeCount(), "nodes, quorum", m.Quorum())

	_, err = redlock.New([]string{"redis://:secret@127.0.0.1:99999"})
	fmt.Println(errors.Is(err, redlock.ErrInvalidArgument), strings.Contains(err.Error(), "secret"))
	// Output:
	// 3 nodes, quorum 2
	// true false
}

// Bad durations are rejected before anything is sent, with ErrInvalidArgument: TTLs that are
// not positive, too short for the drift allowance, or longer than the manager's maximum TTL
// (DefaultMaxTTL, a minute, unless set with WithMaxTTL; hold locks longer with auto-renewal).
func ExampleManager_Lock_invalidTTL() {
	m, err := redlock.New([]string{"redis://127.0.0.1:7001"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	for _, ttl := range []time.Duration{0, -time.Second, 2 * time.Millisecond, time.Hour, 50 * 24 * time.Hour} {
		_, err := m.Lock("orders:42", ttl)
		fmt.Printf("%v: %v\n", ttl, errors.Is(err, redlock.ErrInvalidArgument))
	}
	// Output:
	// 0s: true
	// -1s: true
	// 2ms: true
	// 1h0m0s: true
	// 1200h0m0s: true
}

// TryLock makes a single attempt: it fails at once while someone else holds the lock.
func ExampleManager_TryLock() {
	nodes := strings.Split(os.Getenv("REDLOCK_NODES"), ",")
	m, err := redlock.New(nodes, redlock.WithTimeouts(time.Second, 500*time.Millisecond))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()

	held, err := m.TryLock("example:report", 5*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer held.Free()

	_, err = m.TryLock("example:report", 5*time.Second)
	fmt.Println("second TryLock:", errors.Is(err, redlock.ErrNotAcquired))
	fmt.Println("unlock:", held.Unlock())
	// Output:
	// second TryLock: true
	// unlock: <nil>
}

// LockWait keeps trying until the wait is over: here the holder releases after 100 ms.
func ExampleManager_LockWait() {
	nodes := strings.Split(os.Getenv("REDLOCK_NODES"), ",")
	m, err := redlock.New(nodes,
		redlock.WithRetry(0, 20*time.Millisecond), // LockWait uses the delay, not the count
		redlock.WithTimeouts(time.Second, 500*time.Millisecond))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()

	first, err := m.Lock("example:nightly-job", 10*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer first.Free()
	go func() {
		time.Sleep(100 * time.Millisecond)
		_ = first.Unlock()
	}()

	second, err := m.LockWait("example:nightly-job", 10*time.Second, 5*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer second.Free()
	fmt.Println("got it after the first holder released:", second.Valid())
	fmt.Println("unlock:", second.Unlock())
	// Output:
	// got it after the first holder released: true
	// unlock: <nil>
}

// Acquire takes every option: how long to wait (the retry policy by default, NoWait for one
// attempt, Wait(d) to keep trying until d has passed), Fenced, AutoRenew and its companions.
func ExampleManager_Acquire() {
	nodes := strings.Split(os.Getenv("REDLOCK_NODES"), ",")
	m, err := redlock.New(nodes,
		redlock.WithRetry(3, 20*time.Millisecond), // Wait uses the delay, not the count
		redlock.WithTimeouts(time.Second, 500*time.Millisecond))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()

	first, err := m.Acquire("example:acquire", 10*time.Second, redlock.NoWait(), redlock.Fenced())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer first.Free()

	_, err = m.Acquire("example:acquire", 10*time.Second, redlock.NoWait())
	fmt.Println("NoWait while held:", errors.Is(err, redlock.ErrNotAcquired))

	go func() {
		time.Sleep(100 * time.Millisecond)
		_ = first.Unlock()
	}()
	second, err := m.Acquire("example:acquire", 10*time.Second,
		redlock.Wait(5*time.Second), redlock.Fenced(), redlock.AutoRenew(time.Minute))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer second.Free()
	fmt.Println("Wait after the release:", second.Valid(), second.Renewing(),
		second.FencingToken() > first.FencingToken())
	fmt.Println("unlock:", second.Unlock())
	// Output:
	// NoWait while held: true
	// Wait after the release: true true true
	// unlock: <nil>
}

// Validity tells how long the lock may still be relied on; Extend pushes it back.
func ExampleLock_Extend() {
	nodes := strings.Split(os.Getenv("REDLOCK_NODES"), ",")
	m, err := redlock.New(nodes, redlock.WithTimeouts(time.Second, 500*time.Millisecond))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()

	l, err := m.Lock("example:extend", 2*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Free()
	fmt.Println("under 2s:", l.Validity() <= 2*time.Second)
	if err := l.Extend(30 * time.Second); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("over 25s:", l.Validity() > 25*time.Second)
	_ = l.Unlock()
	fmt.Println("after unlock:", l.Validity())
	// Output:
	// under 2s: true
	// over 25s: true
	// after unlock: 0s
}

// NodeOutcomes reports what each node did during the acquisition.
func ExampleLock_NodeOutcomes() {
	nodes := strings.Split(os.Getenv("REDLOCK_NODES"), ",")
	m, err := redlock.New(nodes, redlock.WithTimeouts(time.Second, 500*time.Millisecond))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()

	l, err := m.Lock("example:outcomes", 5*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Free()
	defer l.Unlock()
	// Nodes that had not answered when the quorum was reached show as "pending".
	for i, o := range l.NodeOutcomes() {
		fmt.Println("node", i, "granted or pending:", o == redlock.NodeSuccess || o == redlock.NodePending)
	}
	fmt.Println("quorum reached:", l.Granted() >= m.Quorum())
	// Output:
	// node 0 granted or pending: true
	// node 1 granted or pending: true
	// node 2 granted or pending: true
	// quorum reached: true
}

// Restart quarantine (on by default) keeps a node that may have lost the keys it held (it
// restarted, or its keyspace was flushed) out of the quorum for the maximum TTL, and
// NodeStates tells which nodes are out, for how long and why. These nodes have kept their
// keyspace since a manager first trusted them (their markers are current), so every one
// counts. Before its first acquisition a manager has heard from no node, and reports none
// quarantined.
func ExampleManager_NodeStates() {
	nodes := strings.Split(os.Getenv("REDLOCK_NODES"), ",")
	m, err := redlock.New(nodes, redlock.WithTimeouts(time.Second, 500*time.Millisecond))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()

	l, err := m.TryLock("example:quarantine", 5*time.Second)
	if err != nil {
		fmt.Println(err) // with too many nodes quarantined: "unavailable: … in restart quarantine …"
		return
	}
	defer l.Free()
	defer l.Unlock()

	states, err := m.NodeStates()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range states {
		if s.Quarantined {
			fmt.Printf("node %d: quarantined for another %v (%v)\n", s.Index, s.Remaining, s.Reason)
		} else {
			fmt.Printf("node %d: counts (quarantine reason: %v)\n", s.Index, s.Reason)
		}
	}
	// Output:
	// node 0: counts (quarantine reason: none)
	// node 1: counts (quarantine reason: none)
	// node 2: counts (quarantine reason: none)
}

// Metrics gives the manager's counters and histograms in the Prometheus text format, to serve
// on a /metrics endpoint (for example from an http.HandlerFunc).
func ExampleManager_Metrics() {
	nodes := strings.Split(os.Getenv("REDLOCK_NODES"), ",")
	m, err := redlock.New(nodes, redlock.WithTimeouts(time.Second, 500*time.Millisecond))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	for i := 0; i < 2; i++ {
		l, err := m.Lock("example:metrics", 5*time.Second)
		if err != nil {
			fmt.Println(err)
			return
		}
		_ = l.Unlock()
		l.Free()
	}

	text, err := m.Metrics()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "redlock_acquire_total") || strings.HasPrefix(line, "redlock_unlock_total{result=\"ok\"}") {
			fmt.Println(line)
		}
	}
	// Output:
	// redlock_acquire_total{result="granted"} 2
	// redlock_acquire_total{result="not_acquired"} 0
	// redlock_acquire_total{result="unavailable"} 0
	// redlock_acquire_total{result="invalid_input"} 0
	// redlock_acquire_total{result="internal"} 0
	// redlock_acquire_total{result="cancelled"} 0
	// redlock_unlock_total{result="ok"} 2
}

// Errors carry the library's status and message; errors.As gives access to both.
func ExampleError() {
	m, err := redlock.New([]string{"redis://127.0.0.1:7001"})
	if err != nil {
		fmt.Println(err)
		return
	}
	m.Close()

	_, err = m.Lock("orders:42", time.Second)
	fmt.Println(errors.Is(err, redlock.ErrClosed))

	_, err = redlock.New(nil)
	var e *redlock.Error
	if errors.As(err, &e) {
		fmt.Println(e.Status, "|", e.Message)
	}
	// Output:
	// true
	// invalid argument | invalid input: at least one node is required
}

// AutoRenew keeps a lock alive while the work runs; the Lost channel says if it could not.
// Here a bound of two renewals makes it end on purpose.
func ExampleLock_AutoRenew() {
	nodes := strings.Split(os.Getenv("REDLOCK_NODES"), ",")
	m, err := redlock.New(nodes, redlock.WithTimeouts(time.Second, 500*time.Millisecond))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()

	l, err := m.Lock("example:renewed", time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Free()
	if err := l.AutoRenew(0, 2, nil); err != nil { // no hold bound, at most 2 renewals
		fmt.Println(err)
		return
	}

	work := time.After(5 * time.Second) // longer than the renewals allow
	select {
	case <-l.Lost():
		fmt.Println("lost before the work finished; validity:", l.Validity())
	case <-work:
		fmt.Println("work done")
	}
	fmt.Println("unlock:", errors.Is(l.Unlock(), redlock.ErrNotHeld))
	// Output:
	// lost before the work finished; validity: 0s
	// unlock: true
}

// Lock options: AutoRenew keeps the lock alive from the moment it is acquired, OnLost hears
// when it cannot, and LostReason says why. Here a hold bound of 400 ms ends it on purpose
// (before the 1 s TTL runs out: a late renewal on a busy machine cannot lose it first).
func ExampleAutoRenew() {
	nodes := strings.Split(os.Getenv("REDLOCK_NODES"), ",")
	m, err := redlock.New(nodes, redlock.WithTimeouts(time.Second, 500*time.Millisecond))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()

	lost := make(chan string, 1)
	l, err := m.Lock("example:option-renewed", time.Second,
		redlock.AutoRenew(400*time.Millisecond), // renewed for at most 400 ms
		redlock.OnLost(func(l *redlock.Lock) { lost <- l.Resource() }))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Free()
	fmt.Println("renewing:", l.Renewing(), "TTL:", l.TTL())

	select {
	case <-l.Lost():
		fmt.Println("lost:", strings.HasPrefix(l.LostReason(), "maximum hold time reached"))
	case <-time.After(5 * time.Second):
		fmt.Println("work done")
	}
	fmt.Println("OnLost for", <-lost)
	fmt.Println("renewing:", l.Renewing(), "validity:", l.Validity())
	// Output:
	// renewing: true TTL: 1s
	// lost: true
	// OnLost for example:option-renewed
	// renewing: false validity: 0s
}

// Fenced gives each grant a fencing token larger than every earlier one of the resource; the
// storage the lock protects refuses writes with a token lower than one it has seen, so a
// holder that was paused past its validity cannot overwrite its successor's work.
func ExampleFenced() {
	nodes := strings.Split(os.Getenv("REDLOCK_NODES"), ",")
	m, err := redlock.New(nodes, redlock.WithTimeouts(time.Second, 500*time.Millisecond))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()

	first, err := m.Lock("example:fenced", 10*time.Second, redlock.Fenced())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer first.Free()
	_ = first.Unlock()

	// Fenced composes with the other options and with Acquire, TryLock and LockWait.
	second, err := m.TryLock("example:fenced", 10*time.Second, redlock.Fenced(), redlock.AutoRenew(time.Minute))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer second.Free()
	fmt.Println("tokens increase:", first.FencingToken() > 0 && second.FencingToken() > first.FencingToken())
	// Send the token with every write, e.g. as the argument of a script that keeps the
	// highest token seen and refuses lower ones.
	fmt.Println("unlock:", second.Unlock())

	plain, err := m.Lock("example:plain", 10*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer plain.Free()
	fmt.Println("plain lock's token:", plain.FencingToken())
	_ = plain.Unlock()
	// Output:
	// tokens increase: true
	// unlock: <nil>
	// plain lock's token: 0
}

// Holders tells who holds a resource: the holder a quorum of nodes agrees on, named by the
// label of the manager that took the lock (WithLabel), and each node's answer. It is a
// snapshot for people and monitoring: take the lock to act on the resource.
func ExampleManager_Holders() {
	nodes := strings.Split(os.Getenv("REDLOCK_NODES"), ",")
	worker, err := redlock.New(nodes, redlock.WithLabel("billing-7:4242"),
		redlock.WithTimeouts(time.Second, 500*time.Millisecond))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer worker.Close()
	monitor, err := redlock.New(nodes, redlock.WithTimeouts(time.Second, 500*time.Millisecond))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer monitor.Close()

	l, err := worker.TryLock("example:holders", 10*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Free()

	h, err := monitor.Holders("example:holders")
	if err != nil {
		fmt.Println(err)
		return
	}
	holder, ok := h.Holder()
	fmt.Println("locked:", ok, "by:", holder.Label, "kind:", holder.Kind)
	fmt.Println("the worker's lock:", string(holder.ID) == l.Value())
	fmt.Println("TTL within the lock's:", holder.TTL > 0 && holder.TTL <= 10*time.Second)
	fmt.Println("held on a quorum of nodes:", h.HeldOn() >= h.Quorum, h.Quorum, "of", len(h.Nodes))

	_ = l.Unlock()
	h, err = monitor.Holders("example:holders")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("after Unlock, locked:", h.IsLocked())
	// Output:
	// locked: true by: billing-7:4242 kind: lock
	// the worker's lock: true
	// TTL within the lock's: true
	// held on a quorum of nodes: true 2 of 3
	// after Unlock, locked: false
}

// A semaphore of two permits: two holders at once, whichever process they run in; a third is
// refused (TryAcquire) or waits (AcquireWait) until a holder gives its permit back, and then
// gets that permit's slot. Every caller of a semaphore names the same count.
func ExampleManager_Semaphore() {
	nodes := strings.Split(os.Getenv("REDLOCK_NODES"), ",")
	m, err := redlock.New(nodes, redlock.WithTimeouts(time.Second, 500*time.Millisecond))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()

	exports, err := m.Semaphore("example:exports", 2) // sends nothing
	if err != nil {
		fmt.Println(err)
		return
	}
	a, err := exports.TryAcquire(10 * time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Free()
	b, err := exports.TryAcquire(10 * time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Free()
	slotA, permits, _ := a.Permit()
	slotB, _, _ := b.Permit()
	fmt.Println("two permits of", permits, "in distinct slots:", slotA != slotB)

	_, err = exports.TryAcquire(10 * time.Second)
	fmt.Println("a third:", errors.Is(err, redlock.ErrNotAcquired))

	go func() {
		time.Sleep(100 * time.Millisecond)
		_ = a.Unlock()
	}()
	c, err := exports.AcquireWait(10*time.Second, 5*time.Second) // woken by the Unlock
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Free()
	slotC, _, _ := c.Permit()
	fmt.Println("a waiter gets the slot given back:", slotC == slotA)

	_, err = m.Semaphore("example:exports", redlock.MaxPermits+1)
	fmt.Println("1001 permits:", errors.Is(err, redlock.ErrInvalidArgument))
	four, _ := m.Semaphore("example:exports", 4)
	_, err = four.TryAcquire(10 * time.Second)
	fmt.Println("another count while permits are held:", errors.Is(err, redlock.ErrInvalidArgument))

	fmt.Println("unlock:", b.Unlock(), c.Unlock())
	// Output:
	// two permits of 2 in distinct slots: true
	// a third: true
	// a waiter gets the slot given back: true
	// 1001 permits: true
	// another count while permits are held: true
	// unlock: <nil> <nil>
}
