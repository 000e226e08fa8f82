package redlock_test

// The Go code of README.md. Each ```go block there is, byte for byte, the body of one of
// these functions (or of a runnable Example or Test): TestReadmeBlocks checks that, and
// TestReadmeSnippets runs every function here against the test servers. Edit the code here,
// then copy the body into the README (without the function's indentation).
//
// The parameters are the names a README block uses without defining them (nodes, m, done,
// mux); TestReadmeSnippets passes each by its type (see readmeArgs).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"time"

	redlock "github.com/redlock-quorum/redlock/bindings/go"
)

// readmeSnippets are the functions TestReadmeSnippets runs.
var readmeSnippets = []any{
	readmeQuickstart,
	readmeAcquireOptions,
	readmeShared,
	readmeFair,
	readmeMany,
	readmeSemaphore,
	readmeElection,
	readmeNodeStates,
	readmeMetrics,
	readmeErrors,
	readmeLabelAndPrefix,
	readmeHolders,
	readmeTLS,
}

// tlsNodes are the URLs of nodes that serve TLS only and require a client certificate, and
// tlsPEM the files a client of theirs needs: the parameters of readmeTLS (see readmeArgs).
type tlsNodes []string

type tlsPEM struct{ CA, Cert, Key string }

func readmeTLS(nodes tlsNodes, pem tlsPEM) error {
	// nodes: []string{"rediss://10.0.0.1:6380", ...}; pem.CA, pem.Cert, pem.Key: PEM files
	m, err := redlock.New(nodes,
		redlock.WithTLSCAFile(pem.CA),                // default: the system's trust store
		redlock.WithTLSClientCert(pem.Cert, pem.Key), // mutual TLS, when the nodes ask for it
	)
	if err != nil {
		return err
	}
	defer m.Close()

	l, err := m.Lock("orders:42", 10*time.Second) // a node refused: NodeTLS, and why in err
	if err != nil {
		return err
	}
	defer l.Free()
	return l.Unlock()
}

func readmeQuickstart(nodes []string) error {
	// nodes: []string{"redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003"}
	m, err := redlock.New(nodes, redlock.WithRetry(3, 200*time.Millisecond))
	if err != nil {
		return err
	}
	defer m.Close()

	l, err := m.Lock("orders:42", 10*time.Second) // errors.Is(err, redlock.ErrNotAcquired), redlock.ErrUnavailable
	if err != nil {
		return err
	}
	defer l.Free()
	// ... finish before l.Validity() runs out, or l.Extend(10 * time.Second)
	return l.Unlock()
}

func readmeAcquireOptions(m *redlock.Manager, done <-chan struct{}) error {
	l, err := m.Acquire("orders:42", 10*time.Second,
		redlock.Wait(5*time.Second),  // wait up to 5 s, woken by the release (NoWait(): one attempt; neither: WithRetry's policy)
		redlock.Fenced(),             // l.FencingToken(): larger than every earlier fenced grant
		redlock.AutoRenew(time.Hour), // renewed until Unlock, for at most an hour
		redlock.OnLost(func(l *redlock.Lock) { log.Print("lost: ", l.LostReason()) }))
	if err != nil {
		return err
	}
	defer l.Free()
	defer l.Unlock()
	select {
	case <-l.Lost(): // renewal failed or hit its bound: stop touching the resource
		return errors.New(l.LostReason())
	case <-done:
	}
	// every write to the protected store carries l.FencingToken(); the store refuses lower ones
	return nil
}

func readmeShared(m *redlock.Manager) error {
	r, err := m.LockWait("catalog", 10*time.Second, 5*time.Second, redlock.WithShared()) // beside other readers
	if err != nil {
		return err // ErrNotAcquired: a writer held it (or waited for it) for 5 s
	}
	defer r.Free()
	// ... read the catalog: writers (m.Lock("catalog", …) without WithShared) wait until every reader unlocks
	return r.Unlock()
}

func readmeFair(m *redlock.Manager) error {
	l, err := m.LockWait("printer", 10*time.Second, 30*time.Second, redlock.WithFair()) // first come, first served
	if err != nil {
		return err // ErrNotAcquired: not our turn within 30 s; ErrInvalidArgument: WithFair with WithOwner or WithShared
	}
	defer l.Free()
	if ticket, queued := l.Ticket(); queued {
		log.Printf("served in turn, ticket %d", ticket) // every waiter with a lower ticket was served first
	}
	// ... print; Unlock wakes the next waiter in the queue, and it alone
	return l.Unlock()
}

func readmeMany(m *redlock.Manager) error {
	l, err := m.LockManyWait([]string{"accounts:17", "accounts:4"}, 10*time.Second, 5*time.Second) // both or neither
	if err != nil {
		return err // ErrInvalidArgument: no resources, one named twice, more than redlock.MaxResources
	}
	defer l.Free()
	log.Printf("holding %q until %v from now", l.Resources(), l.Validity())
	return l.Unlock() // every key; l.Extend and auto-renewal act on the set too
}

func readmeSemaphore(m *redlock.Manager) error {
	exports, err := m.Semaphore("exports", 4) // at most 4 exports at once, in every process; sends nothing
	if err != nil {
		return err // ErrInvalidArgument: an empty name, 0 or more than redlock.MaxPermits permits
	}
	p, err := exports.AcquireWait(time.Minute, 30*time.Second, redlock.AutoRenew(time.Hour)) // woken by a release
	if err != nil {
		return err // ErrNotAcquired: 4 held for 30 s; ErrInvalidArgument: held under another count
	}
	defer p.Free()
	slot, permits, _ := p.Permit()
	log.Printf("export in slot %d of %d", slot, permits)
	// ... export; a holder that dies gives its permit back when its TTL runs out
	return p.Unlock()
}

func readmeElection(m *redlock.Manager) error {
	election, err := m.Election("scheduler", 10*time.Second) // leaderships of 10 s, renewed; sends nothing
	if err != nil {
		return err // ErrInvalidArgument: an empty or too long name, a bad TTL
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leaders := election.Observe(ctx) // every new leader, in increasing term order

	leadership, err := election.Campaign(ctx, "10.0.0.7:8080") // waits until it leads, or ctx ends
	if err != nil {
		return err // ErrCancelled, ErrNotAcquired (a deadline, or Wait/NoWait over), ErrInvalidArgument
	}
	defer leadership.Free()
	log.Printf("leading in term %d", leadership.Term()) // pass the term to every store written
	if l := <-leaders; l.Term != leadership.Term() || l.Value != "10.0.0.7:8080" {
		return fmt.Errorf("observed %+v", l)
	}
	if err := leadership.Proclaim("10.0.0.7:8081"); err != nil { // a new value, the same term
		return err
	}
	select {
	case <-leadership.Lost(): // renewal could not confirm it: stop acting as the leader
		return errors.New("leadership lost")
	default:
	}
	l, err := election.Leader(ctx) // nil when no leader is held by a quorum
	if err != nil || l == nil || l.Value != "10.0.0.7:8081" {
		return fmt.Errorf("leader: %+v, %v", l, err)
	}
	return leadership.Resign() // wakes the waiting candidates
}

func readmeNodeStates(m *redlock.Manager) error {
	states, err := m.NodeStates() // after a connection: before it, no node is known to be quarantined
	if err != nil {
		return err
	}
	for _, s := range states {
		if s.Quarantined {
			log.Printf("node %d counts again in %v at the latest (%v)", s.Index, s.Remaining, s.Reason)
		}
	}
	return nil
}

func readmeMetrics(m *redlock.Manager, mux *http.ServeMux) error {
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		text, err := m.Metrics()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		io.WriteString(w, text)
	})
	return nil
}

func readmeErrors(m *redlock.Manager) error {
	l, err := m.TryLock("orders:43", 5*time.Second)
	switch {
	case errors.Is(err, redlock.ErrNotAcquired):
		return nil // someone else has it
	case errors.Is(err, redlock.ErrUnavailable):
		return err // too many Redis nodes down or in restart quarantine
	case err != nil:
		var e *redlock.Error
		if errors.As(err, &e) {
			log.Printf("status %d (%v): %s", e.Status, e.Status, e.Message)
		}
		return err
	}
	defer l.Free()
	return l.Unlock()
}

func readmeLabelAndPrefix(nodes []string) error {
	host, _ := os.Hostname()
	m, err := redlock.New(nodes,
		redlock.WithLabel(fmt.Sprintf("%s:%d", host, os.Getpid())), // who holds a lock, for Holders and `redlock inspect`
		redlock.WithKeyPrefix(""))                                  // keys named like node-redlock's and redsync's (default "redlock:")
	if err != nil {
		return err
	}
	defer m.Close()

	l, err := m.Lock("orders:42", 10*time.Second) // the key is "orders:42", as for node-redlock's lock on "orders:42"
	if err != nil {
		return err
	}
	defer l.Free()
	log.Printf("stored on the nodes: %s", l.Value()) // "<token>.<unix ms> host:pid"
	return l.Unlock()
}

func readmeHolders(m *redlock.Manager) error {
	h, err := m.Holders("orders:42")
	if err != nil {
		return err // ErrInvalidArgument for a bad name; a node that fails is a HoldFailed entry
	}
	if holder, ok := h.Holder(); ok { // the holder a quorum of nodes agrees on
		log.Printf("orders:42: held by %q for %v, %v left", holder.Label, holder.HeldFor, holder.TTL)
	} else {
		log.Printf("orders:42: not locked (held on %d of %d nodes)", h.HeldOn(), len(h.Nodes))
	}
	for _, n := range h.Nodes {
		if n.State == redlock.HoldFailed {
			log.Printf("node %d did not answer", n.Index)
		}
	}
	return nil
}
