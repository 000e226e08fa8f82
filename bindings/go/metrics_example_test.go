package redlock_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The example program examples/metrics serves the metrics over HTTP: built with this test's
// link mode and run against the shared servers on a port the kernel picks, it answers a 404
// for another path and the Prometheus text at /metrics, with the one lock it took counted,
// and exits 0 on its own after its last request (-requests 1).
func TestMetricsServerExample(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build examples/metrics: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "metrics")
	args := []string{"build", "-o", bin}
	if wantLinkMode == "dynamic" {
		args = append(args, "-tags", "redlock_dynamic")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, goBin, append(args, "./examples/metrics")...).CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/metrics: %v\n%s", err, out)
	}

	cmd := exec.Command(bin, "--nodes", strings.Join(sharedNodes, ","), "--listen", "127.0.0.1:0",
		"--serve-for", "60s", "--requests", "1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := startProcess(cmd); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait() // after the pipe is drained, as Wait requires
	}()
	t.Cleanup(func() { // killed by PID if a check below failed first
		_ = cmd.Process.Kill()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
		}
	})

	var first string
	select {
	case first = <-lines:
	case <-time.After(30 * time.Second):
		t.Fatalf("no `serving` line within 30 s; stderr: %s", stderr.String())
	}
	addr, ok := strings.CutPrefix(first, "serving http://")
	addr, ok2 := strings.CutSuffix(addr, "/metrics")
	if !ok || !ok2 {
		t.Fatalf("unexpected first line %q; stderr: %s", first, stderr.String())
	}

	client := &http.Client{Timeout: 10 * time.Second}
	get := func(path string) (*http.Response, string) {
		resp, err := client.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return resp, string(body)
	}
	if resp, _ := get("/elsewhere"); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET /elsewhere: %s, want 404", resp.Status)
	}
	resp, text := get("/metrics")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Fatalf("Content-Type %q", ct)
	}
	checkExposition(t, text)
	atLeastOne := func(prefix string) {
		t.Helper()
		for _, line := range strings.Split(text, "\n") {
			if rest, ok := strings.CutPrefix(line, prefix); ok {
				v, err := strconv.ParseFloat(rest[strings.LastIndexByte(rest, ' ')+1:], 64)
				if err != nil || v < 1 {
					t.Fatalf("%q: want a value >= 1", line)
				}
				return
			}
		}
		t.Fatalf("no sample %s… in:\n%s", prefix, text)
	}
	atLeastOne(`redlock_acquire_total{result="granted"} `)
	atLeastOne(`redlock_unlock_total{result="ok"} `)
	atLeastOne(`redlock_acquire_wait_seconds_count `)
	for node := range 3 {
		atLeastOne(`redlock_node_requests_total{node="` + strconv.Itoa(node) + `",`)
	}

	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the example exited with %v; stderr: %s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the example still runs 30 s after its last request")
	}
	if last := <-lines; last != "served 1 /metrics requests" {
		t.Fatalf("last line %q", last)
	}
}
