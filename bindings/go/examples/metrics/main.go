// Command metrics serves a Manager's metrics in the Prometheus text format at /metrics with
// net/http: the library has no HTTP server of its own, and Manager.Metrics is all a handler
// needs.
//
//	go run ./examples/metrics -nodes redis://127.0.0.1:7001,redis://127.0.0.1:7002,redis://127.0.0.1:7003 \
//	    -listen 127.0.0.1:9464 -serve-for 60s
//	curl http://127.0.0.1:9464/metrics
//
// It takes and releases one lock first, so that the counters have moved, prints
// "serving http://ADDR/metrics" (with the port the kernel chose for -listen HOST:0), and then
// serves until -serve-for has passed (default 60s) or, with -requests N, after the Nth
// /metrics request, whichever comes first. Every request gets a fresh snapshot; any other path
// is a 404. Exit status: 0 after serving, 2 for bad arguments, 1 when the listener cannot be
// set up. Flags may be written -flag or --flag.
//
// In a real program, register the handler on the mux the program already serves.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	redlock "github.com/redlock-quorum/redlock/bindings/go"
)

func main() {
	os.Exit(run())
}

func run() int {
	flags := flag.NewFlagSet("metrics", flag.ContinueOnError)
	nodes := flags.String("nodes", "", "comma-separated node URLs (redis://host:port,…); required")
	listen := flags.String("listen", "127.0.0.1:9464", "the address to serve on, HOST:PORT (PORT 0: any free port)")
	serveFor := flags.Duration("serve-for", 60*time.Second, "how long to serve")
	requests := flags.Int64("requests", 0, "stop after this many /metrics requests (0: no limit)")
	if err := flags.Parse(os.Args[1:]); err != nil {
		return 2 // the flag package has printed the error and the usage
	}
	bad := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "metrics: "+format+"\n", args...)
		flags.Usage()
		return 2
	}
	switch {
	case flags.NArg() > 0:
		return bad("unexpected argument %q", flags.Arg(0))
	case *nodes == "":
		return bad("--nodes is required")
	case *serveFor <= 0:
		return bad("--serve-for %v: want a positive duration", *serveFor)
	case *requests < 0:
		return bad("--requests %d: want 0 (no limit) or more", *requests)
	}

	m, err := redlock.New(strings.Split(*nodes, ","))
	if err != nil {
		fmt.Fprintln(os.Stderr, "metrics:", err)
		return 2
	}
	defer m.Close()

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "metrics:", err)
		return 1
	}
	lockOnce(m)
	return serve(m, ln, *serveFor, *requests)
}

// lockOnce takes and releases one lock, so that the acquire, hold, unlock and per-node series
// are not all 0. A failure is counted too: the caller serves anyway.
func lockOnce(m *redlock.Manager) {
	l, err := m.Lock("metrics_server:example", 10*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, "metrics: lock:", err)
		return
	}
	if err := l.Unlock(); err != nil {
		fmt.Fprintln(os.Stderr, "metrics: unlock:", err)
	}
	l.Free()
}

// metricsHandler serves m's metrics at GET /metrics, counting the requests served in served
// and closing done after the requests-th (never when requests is 0).
func metricsHandler(m *redlock.Manager, requests int64, served *atomic.Int64, done chan struct{}) http.Handler {
	var once sync.Once
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		text, err := m.Metrics()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		// version=0.0.4 is the Prometheus text format's content type.
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write([]byte(text))
		if n := served.Add(1); requests > 0 && n >= requests {
			once.Do(func() { close(done) })
		}
	})
	return mux
}

// serve serves m's metrics on ln until serveFor has passed or, with requests > 0, after the
// requests-th /metrics request; it returns the exit status.
func serve(m *redlock.Manager, ln net.Listener, serveFor time.Duration, requests int64) int {
	var served atomic.Int64
	done := make(chan struct{})
	srv := &http.Server{
		Handler: metricsHandler(m, requests, &served, done),
		// A client that is slow to send its request does not hold the server past its deadline.
		ReadHeaderTimeout: 2 * time.Second,
		WriteTimeout:      5 * time.Second,
	}
	fmt.Printf("serving http://%s/metrics\n", ln.Addr())
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	timer := time.NewTimer(serveFor)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
	case err := <-serveErr:
		fmt.Fprintln(os.Stderr, "metrics:", err)
		return 1
	}
	// Shutdown lets the response in flight (the last scrape) finish, for at most 5 s.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "metrics: shutdown:", err)
	}
	fmt.Printf("served %d /metrics requests\n", served.Load())
	return 0
}
