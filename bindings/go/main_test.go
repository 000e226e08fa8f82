package redlock_test

// Test infrastructure: real redis-server processes on free loopback ports, each in its own
// temporary directory, killed by PID at teardown; and a tiny RESP client to check, behind the
// library's back, what the nodes really hold.

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	redlock "github.com/redlock-quorum/redlock/bindings/go"
)

// sharedNodes are the URLs of the three servers started by TestMain, for tests that do not
// kill nodes. Tests sharing them use distinct resource names (see uniq). TestMain also puts
// them, comma-separated, in $REDLOCK_NODES for the examples and the package's internal tests.
var sharedNodes []string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

// childEnv names the role of a child process: tests re-execute the test binary with it set
// (see childRoles), and TestMain then runs that role instead of the tests.
const childEnv = "REDLOCK_TEST_CHILD"

// childRoles are the roles a re-executed test binary can play, registered by the test files
// that start children. A role returns the process's exit status.
var childRoles = map[string]func() int{}

func runTests(m *testing.M) int {
	if role := os.Getenv(childEnv); role != "" {
		run, ok := childRoles[role]
		if !ok {
			fmt.Fprintf(os.Stderr, "FAIL: unknown %s role %q\n", childEnv, role)
			return 2
		}
		return run()
	}
	program, err := findRedisServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	redisServerProgram = program
	root, err := os.MkdirTemp("", "redlock-go-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	defer os.RemoveAll(root)
	testRoot = root

	servers, err := startServers(3)
	defer func() {
		for _, s := range servers {
			s.kill()
		}
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: starting redis-server:", err)
		return 1
	}
	for _, s := range servers {
		sharedNodes = append(sharedNodes, s.url())
	}
	os.Setenv("REDLOCK_NODES", strings.Join(sharedNodes, ","))
	if err := firstLock(sharedNodes); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: the first lock on the shared servers:", err)
		return 1
	}
	return m.Run()
}

// Every test node runs the program $REDIS_SERVER names (redis-server on the PATH when unset),
// as the Rust and Python tests' nodes do.
func TestRedisServerProgram(t *testing.T) {
	t.Parallel()
	want := "redis-server"
	if name := os.Getenv(redisServerEnv); name != "" {
		want = name
	}
	wantPath, err := exec.LookPath(want)
	if err != nil {
		t.Fatalf("$%s: %v (TestMain should have failed)", redisServerEnv, err)
	}
	if redisServerProgram != wantPath {
		t.Fatalf("the nodes run %q, want %q ($%s=%q)", redisServerProgram, wantPath, redisServerEnv, os.Getenv(redisServerEnv))
	}
	s := startCluster(t, 1)[0]
	if s.cmd.Path != wantPath {
		t.Fatalf("a node was started as %q, want %q", s.cmd.Path, wantPath)
	}
	t.Logf("test nodes run %s ($%s=%q)", s.cmd.Path, redisServerEnv, os.Getenv(redisServerEnv))
}

// firstLock takes and releases a lock on a brand-new cluster with the default restart
// quarantine, which trusts the nodes at once and writes their markers, and waits until every
// node has its marker. TestMain does it on the shared servers before any test runs, so that
// every manager the tests and examples make finds them marked, as on a cluster in use: no
// test then depends on whether its manager or another test's was the first to contact them.
// (The quarantine tests start clusters of their own to see a first contact.)
func firstLock(nodes []string) error {
	m, err := redlock.New(nodes, redlock.WithTimeouts(time.Second, 500*time.Millisecond))
	if err != nil {
		return err
	}
	defer m.Close()
	l, err := m.TryLock("TestMain:first-lock", 10*time.Second)
	if err != nil {
		return err
	}
	defer l.Free()
	if err := l.Unlock(); err != nil {
		return err
	}
	for _, u := range nodes {
		if !eventually(10*time.Second, func() bool {
			v, err := respDo(addrOf(u), "EXISTS", markerKey)
			return err == nil && v == int64(1)
		}) {
			return fmt.Errorf("%s has no %s after the first lock", u, markerKey)
		}
	}
	return nil
}

// redisServerEnv names the redis-server program the tests start, as for the Rust and Python
// tests: $REDIS_SERVER (a path, or a name looked up on the PATH), or redis-server on the PATH.
const redisServerEnv = "REDIS_SERVER"

// redisServerProgram is the redis-server program every test node runs, resolved by TestMain
// (findRedisServer).
var redisServerProgram string

// findRedisServer resolves $REDIS_SERVER (redis-server when unset) with exec.LookPath. Without
// it the tests fail, never skip: they run against real servers they start themselves.
func findRedisServer() (string, error) {
	name := os.Getenv(redisServerEnv)
	if name == "" {
		p, err := exec.LookPath("redis-server")
		if err != nil {
			return "", fmt.Errorf("redis-server is not on the PATH and $%s does not name another "+
				"(%v). These tests run against real Redis servers they start themselves; install "+
				"it (apt-get install redis-server, or run .ci/setup), or set $%s to its path", redisServerEnv, err, redisServerEnv)
		}
		return p, nil
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("$%s=%q names no redis-server program (%v). It names the program "+
			"these tests start; unset it to use redis-server on the PATH", redisServerEnv, name, err)
	}
	return p, nil
}

// testRoot is the temporary directory under which every server gets a directory of its own.
var testRoot string

// redisServer is one redis-server process.
type redisServer struct {
	port  int
	extra []string // arguments after the defaults (e.g. persistence), kept across restarts
	cmd   *exec.Cmd
	dir   string
	done  chan struct{} // closed when the process has exited and been reaped
	tls   *tlsServe     // serves TLS only (--port 0 --tls-port port): see tls_test.go
}

func (s *redisServer) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }
func (s *redisServer) url() string {
	if s.tls != nil {
		return "rediss://" + s.addr()
	}
	return "redis://" + s.addr()
}

// do sends one command to the server (over TLS for a TLS node; see respDo).
func (s *redisServer) do(args ...string) (any, error) {
	if s.tls != nil {
		return respDoTLS(s.addr(), s.tls.clientConfig(), args...)
	}
	return respDo(s.addr(), args...)
}

// kill kills the server by PID (SIGKILL) and waits until it has been reaped. Idempotent.
func (s *redisServer) kill() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Kill()
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
	}
}

// freePort asks the kernel for a free loopback port. Another process may take it before the
// server binds it; startServer then retries with a new one.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startServer starts one redis-server on a free loopback port, with persistence off unless
// extra says otherwise (its arguments come after the defaults, so they override them), and
// waits (at most 10 s per attempt, 5 attempts) until it answers PING.
func startServer(extra ...string) (*redisServer, error) {
	return startServerTLS(nil, extra...)
}

// startServerTLS is startServer for a node that serves TLS only, as tls says (nil: plain).
func startServerTLS(tls *tlsServe, extra ...string) (*redisServer, error) {
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		dir, err := os.MkdirTemp(testRoot, "redis-"+strconv.Itoa(port)+"-")
		if err != nil {
			return nil, err
		}
		s := &redisServer{port: port, extra: extra, dir: dir, tls: tls}
		if err := s.launch(); err != nil {
			lastErr = fmt.Errorf("attempt %d on port %d: %v", attempt+1, port, err)
			continue
		}
		return s, nil
	}
	return nil, lastErr
}

// launch starts redis-server on s.port in s.dir, with persistence off (unless s.extra turns it
// on), and waits (at most 10 s) until it answers PING; on failure the process is killed and
// the error names the end of its log.
func (s *redisServer) launch() error {
	logFile := filepath.Join(s.dir, "redis.log")
	args := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--logfile", logFile,
		"--daemonize", "no",
	}
	if s.tls != nil {
		args = append(s.tls.args(s.port), args[2:]...) // in place of --port
	}
	cmd := exec.Command(redisServerProgram, append(args, s.extra...)...)
	cmd.Dir = s.dir
	if err := startProcess(cmd); err != nil {
		return fmt.Errorf("redis-server: %w", err)
	}
	done := make(chan struct{})
	s.cmd, s.done = cmd, done
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	if err := waitReady(s, 10*time.Second); err != nil {
		s.kill()
		log, _ := os.ReadFile(logFile)
		return fmt.Errorf("%v; log:\n%s", err, tail(string(log), 800))
	}
	return nil
}

// restart kills the server (SIGKILL: no shutdown, and with persistence off it comes back
// empty) and starts it again on the same port, in the same directory and with the same
// arguments (a node with an AOF reloads it), like a crashed node brought back, with a new
// run_id. Not safe to call concurrently with kill.
func (s *redisServer) restart(t testing.TB) {
	t.Helper()
	s.kill()
	var err error
	for attempt := 0; attempt < 5; attempt++ { // the port may take a moment to be free again
		if err = s.launch(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("restarting redis-server on port %d: %v", s.port, err)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func waitReady(s *redisServer, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		select {
		case <-s.done:
			return errors.New("redis-server exited")
		default:
		}
		reply, err := s.do("PING")
		if err == nil && reply == "PONG" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no PONG within %v (last error: %v)", limit, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func startServers(n int, extra ...string) ([]*redisServer, error) {
	var servers []*redisServer
	for i := 0; i < n; i++ {
		s, err := startServer(extra...)
		if err != nil {
			return servers, err
		}
		servers = append(servers, s)
	}
	return servers, nil
}

// startCluster starts n servers of the test's own (for tests that kill nodes), killed when
// the test ends; extra are more redis-server arguments for each (see startServer).
func startCluster(t *testing.T, n int, extra ...string) []*redisServer {
	t.Helper()
	servers, err := startServers(n, extra...)
	t.Cleanup(func() {
		for _, s := range servers {
			s.kill()
		}
	})
	if err != nil {
		t.Fatalf("starting redis-server: %v", err)
	}
	return servers
}

func urls(servers []*redisServer) []string {
	var u []string
	for _, s := range servers {
		u = append(u, s.url())
	}
	return u
}

// addrOf turns "redis://127.0.0.1:port" into "127.0.0.1:port".
func addrOf(url string) string { return strings.TrimPrefix(url, "redis://") }

// uniq returns a resource name no other test uses: the test's name and random hex.
func uniq(t testing.TB) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return t.Name() + ":" + hex.EncodeToString(b[:])
}

// ---- A minimal RESP2 client ----

// respDo sends one command to addr on a fresh connection and returns the reply: a string for
// simple and bulk strings, nil for a null bulk string, int64 for integers, []any for arrays;
// a Redis error reply is returned as an error.
func respDo(addr string, args ...string) (any, error) {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return nil, err
	}
	return readReply(bufio.NewReader(conn))
}

func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || !strings.HasSuffix(line, "\r\n") {
		return nil, fmt.Errorf("bad RESP line %q", line)
	}
	kind, body := line[0], line[1:len(line)-2]
	switch kind {
	case '+':
		return body, nil
	case '-':
		return nil, fmt.Errorf("redis error: %s", body)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, nil
		}
		out := make([]any, 0, n)
		for i := 0; i < n; i++ {
			v, err := readReply(r)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown RESP type %q", kind)
}

// lockKey is the Redis key that holds a resource's lock.
func lockKey(resource string) string { return "redlock:" + resource }

// holding returns how many of the nodes store value (a Lock's Value) under the resource's key.
func holding(t testing.TB, nodes []string, resource, value string) int {
	t.Helper()
	n := 0
	for _, u := range nodes {
		v, err := respDo(addrOf(u), "GET", lockKey(resource))
		if err != nil {
			t.Fatalf("GET on %s: %v", u, err)
		}
		if v == value {
			n++
		}
	}
	return n
}

// present returns how many of the nodes have the resource's key at all.
func present(t testing.TB, nodes []string, resource string) int {
	t.Helper()
	n := 0
	for _, u := range nodes {
		v, err := respDo(addrOf(u), "EXISTS", lockKey(resource))
		if err != nil {
			t.Fatalf("EXISTS on %s: %v", u, err)
		}
		if v == int64(1) {
			n++
		}
	}
	return n
}

// pttl returns the key's remaining TTL in milliseconds on one node (-2: no key).
func pttl(t testing.TB, node, resource string) int64 {
	t.Helper()
	v, err := respDo(addrOf(node), "PTTL", lockKey(resource))
	if err != nil {
		t.Fatalf("PTTL on %s: %v", node, err)
	}
	n, ok := v.(int64)
	if !ok {
		t.Fatalf("PTTL on %s: unexpected reply %#v", node, v)
	}
	return n
}

// markerKey is the key in which restart quarantine keeps a node's marker: the node's run_id
// (and, after a space, its replication id) as of the time a manager that trusted the node wrote
// it.
const markerKey = "redlock-marker"

// runID returns the server's run_id (INFO server): a new one on every start.
func (s *redisServer) runID(t testing.TB) string {
	t.Helper()
	v, err := respDo(s.addr(), "INFO", "server")
	if err != nil {
		t.Fatalf("INFO server on %s: %v", s.addr(), err)
	}
	info, _ := v.(string)
	for _, line := range strings.Split(info, "\r\n") {
		if id, ok := strings.CutPrefix(line, "run_id:"); ok && id != "" {
			return id
		}
	}
	t.Fatalf("INFO server on %s: no run_id in %q", s.addr(), info)
	return ""
}

// marker returns the run_id the server's restart-quarantine marker names (its value up to the
// first space), and whether it has a marker.
func (s *redisServer) marker(t testing.TB) (string, bool) {
	t.Helper()
	v, err := respDo(s.addr(), "GET", markerKey)
	if err != nil {
		t.Fatalf("GET %s on %s: %v", markerKey, s.addr(), err)
	}
	m, ok := v.(string)
	runID, _, _ := strings.Cut(m, " ")
	return runID, ok
}

// flushAll empties the server's keyspace (FLUSHALL), marker included, without a restart.
func (s *redisServer) flushAll(t testing.TB) {
	t.Helper()
	if v, err := respDo(s.addr(), "FLUSHALL"); err != nil || v != "OK" {
		t.Fatalf("FLUSHALL on %s: %v, %v", s.addr(), v, err)
	}
}

// eventually polls cond every 10 ms until it holds or limit passes; it reports whether it
// held.
func eventually(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}
