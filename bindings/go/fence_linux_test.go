//go:build linux

package redlock_test

// Fencing tokens across goroutines and processes. The tests re-execute the test binary as
// child processes (TestMain runs the role named by $REDLOCK_TEST_CHILD instead of the tests),
// and compare times read from CLOCK_MONOTONIC, which all processes on the machine share.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	redlock "github.com/redlock-quorum/redlock/bindings/go"
)

func init() {
	childRoles["fence-grants"] = childFenceGrants
	childRoles["pause-holder"] = childPauseHolder
}

// monotonic reads CLOCK_MONOTONIC in nanoseconds. Go's own monotonic readings count from each
// process's start, so they cannot be compared across processes; this clock can. (A raw system
// call: test files cannot use cgo, and golang.org/x/sys is not a dependency.)
func monotonic() int64 {
	const clockMonotonic = 1
	var ts syscall.Timespec
	_, _, errno := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0)
	if errno != 0 {
		panic("clock_gettime(CLOCK_MONOTONIC): " + errno.Error())
	}
	return ts.Nano()
}

// fenceScript is the fenced store write: it stores value only with a token greater than every
// token the key has seen, and returns 1 if it did, 0 if the token was stale.
const fenceScript = `local last = tonumber(redis.call('hget', KEYS[1], 'fence') or '0') or 0 ` +
	`if tonumber(ARGV[1]) > last then redis.call('hset', KEYS[1], 'fence', ARGV[1], 'value', ARGV[2]) return 1 end return 0`

// fencedWrite runs fenceScript with EVAL on the store server at addr.
func fencedWrite(addr, key string, token uint64, value string) (int64, error) {
	v, err := respDo(addr, "EVAL", fenceScript, "1", key, strconv.FormatUint(token, 10), value)
	if err != nil {
		return 0, err
	}
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("EVAL: unexpected reply %#v", v)
	}
	return n, nil
}

// ---- Child processes ----

// child is the test binary re-executed in a role, with its stdin, stdout (as lines) and
// stderr (kept for failure messages). It is killed by PID when the test ends.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // stdout, line by line; closed at EOF
	done   chan struct{}
	mu     sync.Mutex
	stderr strings.Builder
}

func (c *child) Write(p []byte) (int, error) { // stderr sink
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stderr.Write(p)
}

func (c *child) errText() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return tail(c.stderr.String(), 2000)
}

func startChild(t *testing.T, role string, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childEnv+"="+role), env...)
	c := &child{cmd: cmd, lines: make(chan string, 4096), done: make(chan struct{})}
	cmd.Stderr = c
	var err error
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := startProcess(cmd); err != nil {
		t.Fatalf("starting a %s child: %v", role, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
		_ = cmd.Wait() // after the last read, as os/exec requires
		close(c.done)
	}()
	t.Cleanup(func() {
		select {
		case <-c.done:
			return
		default:
		}
		_ = cmd.Process.Kill() // by PID; SIGKILL ends a stopped process too
		go func() {
			for range c.lines { // let the reader reach EOF and reap the child
			}
		}()
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			t.Errorf("child %d did not exit after SIGKILL", cmd.Process.Pid)
		}
	})
	return c
}

// expect returns the rest of the child's next stdout line, which must start with prefix.
func (c *child) expect(t *testing.T, prefix string, limit time.Duration) string {
	t.Helper()
	select {
	case line, ok := <-c.lines:
		if !ok {
			<-c.done
			t.Fatalf("child %d exited (%v) before printing %q; stderr:\n%s",
				c.cmd.Process.Pid, c.cmd.ProcessState, prefix, c.errText())
		}
		if !strings.HasPrefix(line, prefix) {
			t.Fatalf("child %d printed %q, want a line starting with %q; stderr:\n%s",
				c.cmd.Process.Pid, line, prefix, c.errText())
		}
		return strings.TrimPrefix(line, prefix)
	case <-time.After(limit):
		t.Fatalf("child %d printed no %q line within %v; stderr:\n%s", c.cmd.Process.Pid, prefix, limit, c.errText())
	}
	return ""
}

// wait waits for the child to exit and requires status 0.
func (c *child) wait(t *testing.T, limit time.Duration) {
	t.Helper()
	for range c.lines {
	}
	select {
	case <-c.done:
	case <-time.After(limit):
		t.Fatalf("child %d did not exit within %v", c.cmd.Process.Pid, limit)
	}
	if !c.cmd.ProcessState.Success() {
		t.Fatalf("child %d: %v; stderr:\n%s", c.cmd.Process.Pid, c.cmd.ProcessState, c.errText())
	}
}

func (c *child) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(c.stdin, line+"\n"); err != nil {
		t.Fatalf("writing to child %d: %v", c.cmd.Process.Pid, err)
	}
}

// childFail reports a child's failure on stderr and returns its exit status.
func childFail(format string, args ...any) int {
	fmt.Fprintf(os.Stderr, "child %d: %s\n", os.Getpid(), fmt.Sprintf(format, args...))
	return 1
}

func childEnvInt(name string) int {
	n, err := strconv.Atoi(os.Getenv(name))
	if err != nil {
		panic(fmt.Sprintf("$%s: %v", name, err))
	}
	return n
}

func readLine(r *bufio.Reader) string {
	s, _ := r.ReadString('\n')
	return strings.TrimSpace(s)
}

// ---- Fencing tokens increase over grants from many goroutines in several processes ----

// grant is one fenced acquisition: who took it, its token, and CLOCK_MONOTONIC read right
// after the grant and right before the release, both while the lock was held.
type grant struct {
	who    string
	token  uint64
	t1, t2 int64
}

// takeFencedGrants has goroutines each take n fenced grants of res, one after the other,
// releasing each at once. It returns the grants and what went wrong.
func takeFencedGrants(m *redlock.Manager, res, who string, goroutines, n int) ([]grant, []string) {
	var (
		mu     sync.Mutex
		grants []grant
		errs   []string
		wg     sync.WaitGroup
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, fmt.Sprintf(format, args...))
	}
	deadline := time.Now().Add(40 * time.Second)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			name := fmt.Sprintf("%s/%d", who, g)
			for i := 0; i < n; {
				if time.Now().After(deadline) {
					fail("%s: only %d of %d grants before the deadline", name, i, n)
					return
				}
				l, err := m.LockWait(res, 5*time.Second, 2*time.Second, redlock.Fenced())
				if errors.Is(err, redlock.ErrNotAcquired) {
					continue
				}
				if err != nil {
					fail("%s: LockWait: %v", name, err)
					return
				}
				t1 := monotonic()
				token, valid := l.FencingToken(), l.Valid()
				t2 := monotonic()
				err = l.Unlock()
				l.Free()
				if !valid || err != nil {
					fail("%s: grant %d: valid %v, Unlock: %v", name, i, valid, err)
				}
				mu.Lock()
				grants = append(grants, grant{who: name, token: token, t1: t1, t2: t2})
				mu.Unlock()
				i++
			}
		}(g)
	}
	wg.Wait()
	return grants, errs
}

// The child side: prints "ready", waits for "go" on stdin, then prints one
// "grant WHO TOKEN T1 T2" line per grant, any "error …" lines, and "done".
func childFenceGrants() int {
	nodes := strings.Split(os.Getenv("REDLOCK_NODES"), ",")
	m, err := redlock.New(nodes, testTimeouts, redlock.WithRetry(0, 5*time.Millisecond))
	if err != nil {
		return childFail("New: %v", err)
	}
	defer m.Close()
	fmt.Println("ready")
	if s := readLine(bufio.NewReader(os.Stdin)); s != "go" {
		return childFail("expected go on stdin, got %q", s)
	}
	who := "child" + strconv.Itoa(os.Getpid())
	grants, errs := takeFencedGrants(m, os.Getenv("REDLOCK_CHILD_RESOURCE"), who,
		childEnvInt("REDLOCK_CHILD_GOROUTINES"), childEnvInt("REDLOCK_CHILD_GRANTS"))
	w := bufio.NewWriter(os.Stdout)
	for _, g := range grants {
		fmt.Fprintf(w, "grant %s %d %d %d\n", g.who, g.token, g.t1, g.t2)
	}
	for _, e := range errs {
		fmt.Fprintf(w, "error %s\n", e)
	}
	fmt.Fprintln(w, "done")
	if err := w.Flush(); err != nil {
		return childFail("stdout: %v", err)
	}
	return 0
}

// Fencing tokens strictly increase in the order the lock was held, over 100 grants taken by
// 4 goroutines here and 3 in each of two child processes, all contending for one resource.
// Each grant records CLOCK_MONOTONIC while it holds the lock; the holding intervals never
// overlap, so sorting by time gives the grant order.
func TestFencingTokensIncrease(t *testing.T) {
	t.Parallel()
	const (
		children          = 2
		childGoroutines   = 3
		parentGoroutines  = 4
		grantsPerRoutine  = 10
		expectedGrantsAll = (children*childGoroutines + parentGoroutines) * grantsPerRoutine
	)
	res := uniq(t)
	var kids []*child
	for i := 0; i < children; i++ {
		kids = append(kids, startChild(t, "fence-grants",
			"REDLOCK_CHILD_RESOURCE="+res,
			"REDLOCK_CHILD_GOROUTINES="+strconv.Itoa(childGoroutines),
			"REDLOCK_CHILD_GRANTS="+strconv.Itoa(grantsPerRoutine)))
	}
	for _, k := range kids {
		k.expect(t, "ready", 30*time.Second)
	}
	m := newManager(t, sharedNodes, redlock.WithRetry(0, 5*time.Millisecond))
	for _, k := range kids {
		k.send(t, "go")
	}
	grants, errs := takeFencedGrants(m, res, "parent", parentGoroutines, grantsPerRoutine)
	for _, e := range errs {
		t.Error(e)
	}
	for _, k := range kids {
		for {
			line := k.expect(t, "", 60*time.Second)
			if line == "done" {
				break
			}
			if e, ok := strings.CutPrefix(line, "error "); ok {
				t.Errorf("child %d: %s", k.cmd.Process.Pid, e)
				continue
			}
			var g grant
			if _, err := fmt.Sscanf(line, "grant %s %d %d %d", &g.who, &g.token, &g.t1, &g.t2); err != nil {
				t.Fatalf("child %d printed %q: %v", k.cmd.Process.Pid, line, err)
			}
			grants = append(grants, g)
		}
		k.wait(t, 10*time.Second)
	}
	if t.Failed() {
		t.FailNow()
	}
	if len(grants) != expectedGrantsAll {
		t.Fatalf("%d grants, want %d", len(grants), expectedGrantsAll)
	}

	sort.Slice(grants, func(i, j int) bool { return grants[i].t1 < grants[j].t1 })
	seen := map[uint64]string{}
	procs := map[string]bool{}
	for i, g := range grants {
		procs[strings.Split(g.who, "/")[0]] = true
		if g.token == 0 {
			t.Fatalf("%s: a fenced grant has token 0", g.who)
		}
		if other, dup := seen[g.token]; dup {
			t.Fatalf("token %d granted twice: to %s and %s", g.token, other, g.who)
		}
		seen[g.token] = g.who
		if i == 0 {
			continue
		}
		p := grants[i-1]
		if p.t2 >= g.t1 {
			t.Fatalf("mutual exclusion: %s held the lock until %d, %s had it from %d", p.who, p.t2, g.who, g.t1)
		}
		if g.token <= p.token {
			t.Fatalf("grant %d (%s, token %d) follows grant %d (%s, token %d): tokens must increase",
				i, g.who, g.token, i-1, p.who, p.token)
		}
	}
	if len(procs) != children+1 {
		t.Fatalf("grants from %d processes, want %d", len(procs), children+1)
	}
	switches := 0
	for i := 1; i < len(grants); i++ {
		if strings.Split(grants[i].who, "/")[0] != strings.Split(grants[i-1].who, "/")[0] {
			switches++
		}
	}
	t.Logf("%d grants, tokens %d..%d, the holder's process changed %d times",
		len(grants), grants[0].token, grants[len(grants)-1].token, switches)
	if switches < children {
		t.Fatalf("the processes took turns only %d times: they did not contend", switches)
	}
}

// ---- A holder paused past its TTL cannot overwrite the next holder's write ----

// The child side: takes a fenced 500 ms lock, checks it is valid, prints "token N", and is
// stopped by the parent before its write. Once resumed (and told "write" on stdin) it makes
// its fenced write with its stale token and prints "wrote R valid V".
func childPauseHolder() int {
	nodes := strings.Split(os.Getenv("REDLOCK_NODES"), ",")
	m, err := redlock.New(nodes, redlock.WithTimeouts(time.Second, 500*time.Millisecond),
		redlock.WithRetry(10, 20*time.Millisecond))
	if err != nil {
		return childFail("New: %v", err)
	}
	defer m.Close()
	l, err := m.Lock(os.Getenv("REDLOCK_CHILD_RESOURCE"), 500*time.Millisecond, redlock.Fenced())
	if err != nil {
		return childFail("Lock: %v", err)
	}
	defer l.Free()
	if !l.Valid() || l.FencingToken() == 0 {
		return childFail("a fresh fenced lock: valid %v, token %d", l.Valid(), l.FencingToken())
	}
	fmt.Printf("token %d\n", l.FencingToken())
	// The parent stops the process about here: between checking the lock and writing.
	if s := readLine(bufio.NewReader(os.Stdin)); s != "write" {
		return childFail("expected write on stdin, got %q", s)
	}
	r, err := fencedWrite(os.Getenv("REDLOCK_CHILD_STORE"), os.Getenv("REDLOCK_CHILD_KEY"), l.FencingToken(),
		"child-"+strconv.Itoa(os.Getpid()))
	if err != nil {
		return childFail("fenced write: %v", err)
	}
	fmt.Printf("wrote %d valid %v\n", r, l.Valid())
	return 0
}

// waitStopped waits until /proc reports the process stopped (state T).
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	ok := eventually(5*time.Second, func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return false
		}
		// pid (comm) state …: the state follows the last ')'.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		return i >= 0 && i+2 < len(s) && s[i+2] == 'T'
	})
	if !ok {
		t.Fatalf("process %d did not stop", pid)
	}
}

// Three rounds: a child takes a fenced lock with a 500 ms TTL and is stopped (SIGSTOP) past
// its TTL; the parent takes the lock, gets a larger token and makes a fenced write to a
// separate redis-server; the child is resumed (SIGCONT) and makes its own fenced write with
// its stale token, which the store rejects every time.
func TestFencingStopsAPausedHolder(t *testing.T) {
	t.Parallel()
	store := startCluster(t, 1)[0]
	m := newManager(t, sharedNodes, redlock.WithRetry(0, 20*time.Millisecond))
	res := uniq(t)
	key := "store:" + res
	var last uint64
	for round := 1; round <= 3; round++ {
		c := startChild(t, "pause-holder",
			"REDLOCK_CHILD_RESOURCE="+res,
			"REDLOCK_CHILD_STORE="+store.addr(),
			"REDLOCK_CHILD_KEY="+key)
		childToken, err := strconv.ParseUint(c.expect(t, "token ", 30*time.Second), 10, 64)
		if err != nil {
			t.Fatalf("round %d: child token: %v", round, err)
		}
		pid := c.cmd.Process.Pid
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatalf("round %d: SIGSTOP: %v", round, err)
		}
		waitStopped(t, pid)
		if childToken <= last {
			t.Fatalf("round %d: the child's token %d does not exceed the previous round's %d", round, childToken, last)
		}

		// The child's lock expires while it is stopped; only then can the parent take it.
		l, err := m.LockWait(res, 5*time.Second, 5*time.Second, redlock.Fenced())
		wantNoErr(t, fmt.Sprintf("round %d: LockWait", round), err)
		if l.FencingToken() <= childToken {
			t.Fatalf("round %d: the parent's token %d does not exceed the paused child's %d", round, l.FencingToken(), childToken)
		}
		value := fmt.Sprintf("parent-round-%d", round)
		r, err := fencedWrite(store.addr(), key, l.FencingToken(), value)
		wantNoErr(t, "parent's fenced write", err)
		if r != 1 {
			t.Fatalf("round %d: the parent's fenced write with token %d was rejected", round, l.FencingToken())
		}

		c.send(t, "write")
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			t.Fatalf("round %d: SIGCONT: %v", round, err)
		}
		if got := c.expect(t, "wrote ", 30*time.Second); got != "0 valid false" {
			t.Fatalf("round %d: the resumed child reports %q, want its write rejected (0) and its lock invalid", round, got)
		}
		c.wait(t, 10*time.Second)
		v, err := respDo(store.addr(), "HMGET", key, "fence", "value")
		wantNoErr(t, "HMGET", err)
		want := []any{strconv.FormatUint(l.FencingToken(), 10), value}
		if fmt.Sprint(v) != fmt.Sprint(want) {
			t.Fatalf("round %d: the store holds %v, want %v", round, v, want)
		}
		last = l.FencingToken()
		wantNoErr(t, "Unlock", l.Unlock())
		l.Free()
	}
}
