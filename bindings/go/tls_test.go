package redlock_test

// TLS (rediss://) through the package: nodes that serve TLS only (--port 0 --tls-port), with
// certificates made for this run by the Rust side (examples/tls_certs.rs), checked behind the
// library's back through a TLS client of the tests' own.

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	redlock "github.com/redlock-quorum/redlock/bindings/go"
)

// tlsServe is how a test node serves TLS, and what the inspection client presents.
type tlsServe struct {
	ca, cert, key         string // the node's CA (for client certificates), certificate, key
	clientCert, clientKey string // what the inspection client (and the tests' managers) present
	authClients           bool   // --tls-auth-clients yes: a client certificate is required
}

func (t *tlsServe) args(port int) []string {
	auth := "no"
	if t.authClients {
		auth = "yes"
	}
	return []string{
		"--port", "0",
		"--tls-port", strconv.Itoa(port),
		"--tls-cert-file", t.cert,
		"--tls-key-file", t.key,
		"--tls-ca-cert-file", t.ca,
		"--tls-auth-clients", auth,
	}
}

// clientConfig trusts the test CA and presents the client certificate.
func (t *tlsServe) clientConfig() *tls.Config {
	pem, err := os.ReadFile(t.ca)
	if err != nil {
		panic(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	pair, err := tls.LoadX509KeyPair(t.clientCert, t.clientKey)
	if err != nil {
		panic(err)
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, ServerName: "127.0.0.1"}
}

// respDoTLS is respDo over TLS.
func respDoTLS(addr string, conf *tls.Config, args ...string) (any, error) {
	d := &net.Dialer{Timeout: 2 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, conf)
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

var (
	certsOnce sync.Once
	certsDir  string
	certsErr  error
)

// testCerts returns the directory of the run's certificates (ca.pem, server.pem/.key,
// client.pem/.key, other-ca.pem), written once by the Rust example tls_certs: built by
// `cargo test`, which .ci/run runs first, or here when it is missing.
func testCerts(t testing.TB) string {
	t.Helper()
	certsOnce.Do(func() {
		root, err := filepath.Abs("../..")
		if err != nil {
			certsErr = err
			return
		}
		prog := os.Getenv("REDLOCK_TLS_CERTS")
		if prog == "" {
			prog = filepath.Join(root, "target", "release", "examples", "tls_certs")
		}
		if _, err := os.Stat(prog); err != nil {
			build := exec.Command("cargo", "build", "--release", "--example", "tls_certs")
			build.Dir = root
			if out, err := build.CombinedOutput(); err != nil {
				certsErr = fmt.Errorf("building examples/tls_certs: %v\n%s", err, tail(string(out), 800))
				return
			}
		}
		certsDir = filepath.Join(testRoot, "tls")
		if out, err := exec.Command(prog, certsDir).CombinedOutput(); err != nil {
			certsErr = fmt.Errorf("%s: %v\n%s", prog, err, out)
		}
	})
	if certsErr != nil {
		t.Fatal(certsErr)
	}
	return certsDir
}

// testTLS is how the test nodes serve TLS, with or without requiring a client certificate.
func testTLS(t testing.TB, authClients bool) *tlsServe {
	d := testCerts(t)
	j := func(name string) string { return filepath.Join(d, name) }
	return &tlsServe{
		ca: j("ca.pem"), cert: j("server.pem"), key: j("server.key"),
		clientCert: j("client.pem"), clientKey: j("client.key"),
		authClients: authClients,
	}
}

// startTLSCluster starts n nodes of the test's own that serve TLS only, killed when it ends.
func startTLSCluster(t *testing.T, n int, serve *tlsServe) []*redisServer {
	t.Helper()
	var servers []*redisServer
	t.Cleanup(func() {
		for _, s := range servers {
			s.kill()
		}
	})
	for i := 0; i < n; i++ {
		s, err := startServerTLS(serve)
		if err != nil {
			t.Fatalf("starting a TLS redis-server: %v", err)
		}
		servers = append(servers, s)
	}
	return servers
}

func TestTLSLockOverMutualTLS(t *testing.T) {
	t.Parallel()
	serve := testTLS(t, true)
	servers := startTLSCluster(t, 3, serve)
	nodes := urls(servers)
	if !strings.HasPrefix(nodes[0], "rediss://127.0.0.1:") {
		t.Fatalf("not a TLS URL: %s", nodes[0])
	}
	m := newManager(t, nodes, redlock.WithTLSCAFile(serve.ca), redlock.WithTLSClientCert(serve.clientCert, serve.clientKey))
	res := uniq(t)
	l, err := m.TryLock(res, 10*time.Second, redlock.Fenced())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Free()
	if l.Granted() < 2 || l.FencingToken() == 0 {
		t.Fatalf("granted %d, fencing token %d", l.Granted(), l.FencingToken())
	}
	key := "redlock:" + res
	holds := func() int {
		n := 0
		for _, s := range servers {
			if v, err := s.do("GET", key); err == nil && v == l.Value() {
				n++
			}
		}
		return n
	}
	if !eventually(5*time.Second, func() bool { return holds() == 3 }) {
		t.Fatalf("the key is on %d of 3 TLS nodes", holds())
	}
	if err := l.Extend(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if !eventually(5*time.Second, func() bool { return holds() == 0 }) {
		t.Fatal("the key outlived the unlock")
	}

	// Without a client certificate the nodes refuse the session: ErrUnavailable, the message
	// naming each node and why.
	bare := newManager(t, nodes, redlock.WithTLSCAFile(serve.ca))
	_, err = bare.TryLock(res, 10*time.Second)
	if !errors.Is(err, redlock.ErrUnavailable) {
		t.Fatalf("without a client certificate: %v", err)
	}
	if msg := err.Error(); strings.Count(msg, "TLS failed") != 3 || !strings.Contains(msg, "client certificate") ||
		strings.Contains(msg, "-----BEGIN") {
		t.Fatalf("message: %s", msg)
	}
	if redlock.NodeTLS != 10 || redlock.NodeTLS.String() != "tls" {
		t.Fatal("NodeTLS is REDLOCK_NODE_TLS (10), named \"tls\"")
	}
}

func TestTLSUntrustedCAAndMixedCluster(t *testing.T) {
	t.Parallel()
	serve := testTLS(t, false)
	tlsNodes := urls(startTLSCluster(t, 2, serve))
	plain := urls(startCluster(t, 1))
	nodes := append(tlsNodes, plain...)
	m := newManager(t, nodes, redlock.WithTLSCAFile(serve.ca))
	l, err := m.TryLock(uniq(t), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	l.Free()
	// Trusting a CA that signed nothing here: both TLS nodes refused, the plain one alone is
	// no quorum.
	other := newManager(t, nodes, redlock.WithTLSCAFile(filepath.Join(testCerts(t), "other-ca.pem")))
	_, err = other.TryLock(uniq(t), 5*time.Second)
	if !errors.Is(err, redlock.ErrUnavailable) || strings.Count(err.Error(), "not signed by a trusted CA") != 2 {
		t.Fatalf("untrusted CA: %v", err)
	}
}

func TestTLSServerNameAndSkippingVerification(t *testing.T) {
	t.Parallel()
	serve := testTLS(t, false)
	nodes := urls(startTLSCluster(t, 3, serve))
	// The node certificate names 127.0.0.1, ::1 and localhost.
	m := newManager(t, nodes, redlock.WithTLSCAFile(serve.ca), redlock.WithTLSServerName("localhost"))
	l, err := m.TryLock(uniq(t), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Unlock()
	l.Free()
	wrong := newManager(t, nodes, redlock.WithTLSCAFile(serve.ca), redlock.WithTLSServerName("redis.example"))
	if _, err := wrong.TryLock(uniq(t), 5*time.Second); !errors.Is(err, redlock.ErrUnavailable) ||
		!strings.Contains(err.Error(), "redis.example") {
		t.Fatalf("another name: %v", err)
	}
	insecure := newManager(t, nodes, redlock.WithTLSInsecureSkipVerify())
	l, err = insecure.TryLock(uniq(t), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Unlock()
	l.Free()
}

func TestTLSOptionsAreChecked(t *testing.T) {
	t.Parallel()
	serve := testTLS(t, false)
	node := []string{"rediss://127.0.0.1:1"}
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for _, c := range []struct {
		opt  redlock.Option
		want string
	}{
		{redlock.WithTLSCAFile(missing), missing},
		{redlock.WithTLSCAFile(serve.clientKey), serve.clientKey},
		{redlock.WithTLSCAFile(""), "empty"},
		{redlock.WithTLSClientCert(serve.clientCert, serve.key), "does not belong"},
		{redlock.WithTLSClientCert(serve.clientCert, ""), "empty"},
		{redlock.WithTLSServerName("not a name!"), "server name"},
	} {
		_, err := redlock.New(node, c.opt)
		if !errors.Is(err, redlock.ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) ||
			strings.Contains(err.Error(), "PRIVATE KEY-----") {
			t.Errorf("want ErrInvalidArgument mentioning %q, got %v", c.want, err)
		}
	}
	m, err := redlock.New(node, redlock.WithTLSCAFile(serve.ca), redlock.WithTLSServerName("localhost"))
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
}
