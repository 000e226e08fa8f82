// Command bench-cycle measures the Go binding's cost on the lock path: it runs uncontended
// TryLock/Unlock cycles on one resource for a number of seconds, after a short warm-up, and
// prints one JSON line with the cycle count and the median and 99th percentile latency of one
// lock+unlock cycle (TryLock, Unlock and Free), in microseconds:
//
//	go run ./cmd/bench-cycle --nodes redis://127.0.0.1:7001,redis://127.0.0.1:7002 --secs 3
//	{"cycles": 1234, "p50_us": 2345.6, "p99_us": 3456.7}
//
// --call picks the acquisition instead of TryLock: "acquire" (Acquire with NoWait), "lock"
// (Lock: the retry policy), "lockwait" (LockWait with a 1 s wait), "fenced" (Acquire with
// NoWait and Fenced: a second round trip). The lock is free, so each takes one attempt.
//
// The settings mirror the Rust benchmark's uncontended row (examples/bench/main.rs, which runs
// this program for its binding table): a 10 s TTL, a 1 ms retry delay, a 200 ms node timeout,
// at most 200 000 cycles. Restart quarantine is on, as by default (and as in the Rust
// benchmark's client): the nodes the Rust benchmark starts just before running this are a
// brand-new cluster, trusted at once. --restart-quarantine=false turns it off, to measure
// without it (every grant then skips its marker check).
package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"time"

	redlock "github.com/redlock-quorum/redlock/bindings/go"
)

func main() {
	nodes := flag.String("nodes", "", "comma-separated node URLs (redis://host:port,…)")
	secs := flag.Float64("secs", 2, "seconds of measured cycles")
	warmup := flag.Float64("warmup", 0.3, "seconds of unmeasured cycles first")
	resource := flag.String("resource", fmt.Sprintf("bench:go:%d", os.Getpid()), "the resource locked")
	quarantine := flag.Bool("restart-quarantine", true,
		"restart quarantine, on by default (--restart-quarantine=false turns it off)")
	call := flag.String("call", "trylock", "the acquisition: trylock, acquire, lock, lockwait or fenced")
	flag.Parse()
	acquire, ok := calls[*call]
	if *nodes == "" || *secs <= 0 || *warmup < 0 || !ok {
		fmt.Fprintln(os.Stderr, "usage: bench-cycle --nodes URL,URL,... [--secs S] [--warmup S] "+
			"[--call trylock|acquire|lock|lockwait|fenced]")
		os.Exit(2)
	}
	if err := run(strings.Split(*nodes, ","), *resource, seconds(*secs), seconds(*warmup), *quarantine, acquire); err != nil {
		fmt.Fprintln(os.Stderr, "bench-cycle:", err)
		os.Exit(1)
	}
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// calls are the acquisitions --call picks from.
var calls = map[string]func(m *redlock.Manager, resource string) (*redlock.Lock, error){
	"trylock": func(m *redlock.Manager, r string) (*redlock.Lock, error) { return m.TryLock(r, ttl) },
	"acquire": func(m *redlock.Manager, r string) (*redlock.Lock, error) {
		return m.Acquire(r, ttl, redlock.NoWait())
	},
	"lock":     func(m *redlock.Manager, r string) (*redlock.Lock, error) { return m.Lock(r, ttl) },
	"lockwait": func(m *redlock.Manager, r string) (*redlock.Lock, error) { return m.LockWait(r, ttl, time.Second) },
	"fenced": func(m *redlock.Manager, r string) (*redlock.Lock, error) {
		return m.Acquire(r, ttl, redlock.NoWait(), redlock.Fenced())
	},
}

const (
	ttl       = 10 * time.Second
	maxCycles = 200_000
)

func run(nodes []string, resource string, secs, warmup time.Duration, quarantine bool,
	acquire func(*redlock.Manager, string) (*redlock.Lock, error)) error {
	opts := []redlock.Option{
		redlock.WithRetry(3, time.Millisecond),
		redlock.WithTimeouts(250*time.Millisecond, 200*time.Millisecond),
	}
	if !quarantine {
		opts = append(opts, redlock.WithRestartQuarantine(false))
	}
	m, err := redlock.New(nodes, opts...)
	if err != nil {
		return err
	}
	defer m.Close()

	// One cycle, timed; ok is false when TryLock or Unlock failed.
	cycle := func() (time.Duration, bool, error) {
		t0 := time.Now()
		l, err := acquire(m, resource)
		if err != nil {
			return time.Since(t0), false, err
		}
		err = l.Unlock()
		l.Free()
		return time.Since(t0), err == nil, err
	}

	for end := time.Now().Add(warmup); time.Now().Before(end); {
		if _, _, err := cycle(); err != nil {
			fmt.Fprintln(os.Stderr, "warm-up:", err)
		}
	}

	lat := make([]time.Duration, 0, 4096)
	failures := 0
	var lastErr error
	for end := time.Now().Add(secs); time.Now().Before(end) && len(lat) < maxCycles; {
		d, ok, err := cycle()
		if ok {
			lat = append(lat, d)
		} else {
			failures++
			lastErr = err
		}
	}
	if failures > 0 {
		fmt.Fprintf(os.Stderr, "bench-cycle: %d failed cycles (last: %v)\n", failures, lastErr)
	}
	if len(lat) == 0 {
		return fmt.Errorf("no successful cycle in %v", secs)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	fmt.Printf("{\"cycles\": %d, \"p50_us\": %.1f, \"p99_us\": %.1f}\n",
		len(lat), micros(percentile(lat, 0.50)), micros(percentile(lat, 0.99)))
	return nil
}

// percentile is the Rust benchmark's: the element at round((len-1) × p) of the sorted slice.
func percentile(sorted []time.Duration, p float64) time.Duration {
	return sorted[int(math.Round(float64(len(sorted)-1)*p))]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
