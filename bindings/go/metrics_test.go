package redlock_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	redlock "github.com/redlock-quorum/redlock/bindings/go"
)

// sampleRE is one sample line of the Prometheus text format: a name, optional labels, a value.
var sampleRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? -?[0-9.e+-]+(Inf)?$`)

// checkExposition checks the Prometheus text format: every line is a comment or a sample, and
// every sample's family has a "# TYPE" line before it (a histogram's _bucket, _sum and _count
// samples belong to the histogram's family).
func checkExposition(t *testing.T, text string) {
	t.Helper()
	if !strings.HasSuffix(text, "\n") {
		t.Fatalf("the metrics text does not end with a newline: %q", tail(text, 200))
	}
	types := map[string]string{}
	samples := 0
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			f := strings.Fields(rest)
			if len(f) != 2 {
				t.Fatalf("line %d: bad TYPE line %q", i+1, line)
			}
			types[f[0]] = f[1]
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		if !sampleRE.MatchString(line) {
			t.Fatalf("line %d is not a sample: %q", i+1, line)
		}
		name := line[:strings.IndexAny(line, "{ ")]
		if !strings.HasPrefix(name, "redlock_") {
			t.Fatalf("line %d: %q does not start with redlock_", i+1, name)
		}
		_, ok := types[name]
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if family, cut := strings.CutSuffix(name, suffix); !ok && cut && types[family] == "histogram" {
				ok = true
			}
		}
		if !ok {
			t.Fatalf("line %d: no # TYPE line before the sample %q", i+1, line)
		}
		samples++
	}
	if samples == 0 {
		t.Fatal("no samples")
	}
}

// hasLine reports whether text has exactly this line.
func hasLine(text, line string) bool {
	for _, l := range strings.Split(text, "\n") {
		if l == line {
			return true
		}
	}
	return false
}

// Known operations on a fresh manager show in its metrics, in the Prometheus text format.
func TestMetrics(t *testing.T) {
	t.Parallel()
	m := newManager(t, sharedNodes, redlock.WithRetry(0, 0))
	other := newManager(t, sharedNodes)
	res := uniq(t)

	text, err := m.Metrics()
	wantNoErr(t, "Metrics of a new manager", err)
	checkExposition(t, text)
	for _, want := range []string{`redlock_acquire_total{result="granted"} 0`, `redlock_unlock_total{result="ok"} 0`} {
		if !hasLine(text, want) {
			t.Fatalf("a new manager's metrics lack %q:\n%s", want, text)
		}
	}

	// Three grants, each unlocked; the last unlocked twice.
	var last *redlock.Lock
	for i := 0; i < 3; i++ {
		l, err := m.Lock(res+"/"+string(rune('a'+i)), 5*time.Second)
		wantNoErr(t, "Lock", err)
		wantNoErr(t, "Unlock", l.Unlock())
		defer l.Free()
		last = l
	}
	wantIs(t, "second Unlock", last.Unlock(), redlock.ErrNotHeld)
	// One attempt on a resource held by another manager.
	held, err := other.Lock(res, 5*time.Second)
	wantNoErr(t, "Lock by the other manager", err)
	defer held.Free()
	_, err = m.TryLock(res, 5*time.Second)
	wantIs(t, "TryLock on a held resource", err, redlock.ErrNotAcquired)
	wantNoErr(t, "Unlock by the other manager", held.Unlock())

	text, err = m.Metrics()
	wantNoErr(t, "Metrics", err)
	checkExposition(t, text)
	for _, want := range []string{
		`redlock_acquire_total{result="granted"} 3`,
		`redlock_acquire_total{result="not_acquired"} 1`,
		`redlock_unlock_total{result="ok"} 3`,
		`redlock_unlock_total{result="not_held"} 1`,
		`redlock_nodes_quarantined 0`,
	} {
		if !hasLine(text, want) {
			t.Fatalf("the metrics lack %q:\n%s", want, text)
		}
	}
	// Per node, by address (the text is longer than the binding's first buffer).
	for _, u := range sharedNodes {
		if !strings.Contains(text, `addr="`+addrOf(u)+`"`) {
			t.Fatalf("the metrics do not name node %s", u)
		}
	}
	t.Logf("%d bytes of metrics", len(text))

	// Each manager counts its own operations.
	text, err = other.Metrics()
	wantNoErr(t, "the other manager's Metrics", err)
	if !hasLine(text, `redlock_acquire_total{result="granted"} 1`) || !hasLine(text, `redlock_unlock_total{result="ok"} 1`) {
		t.Fatalf("the other manager's metrics:\n%s", text)
	}
}

// Passwords never appear in the metrics.
func TestMetricsHidePasswords(t *testing.T) {
	t.Parallel()
	m := newManager(t, []string{"redis://user:hunter2@127.0.0.1:1"})
	text, err := m.Metrics()
	wantNoErr(t, "Metrics", err)
	checkExposition(t, text)
	if strings.Contains(text, "hunter2") {
		t.Fatal("the password leaked into the metrics")
	}
}
