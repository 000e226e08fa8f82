package redlock_test

// Who holds a resource (Manager.Holders), holder labels (WithLabel) and key prefixes
// (WithKeyPrefix, the empty one included, for sharing locks with node-redlock and redsync),
// checked against what the nodes really hold.

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	redlock "github.com/redlock-quorum/redlock/bindings/go"
)

// settle bounds the waits for the nodes that had not answered when a quorum was reached (a
// lock returns as soon as a quorum granted it) or when an unlock returned.
const settle = 5 * time.Second

// holdersOf asks m who holds res, failing the test on an error.
func holdersOf(t testing.TB, m *redlock.Manager, res string) *redlock.Holders {
	t.Helper()
	h, err := m.Holders(res)
	if err != nil {
		t.Fatalf("Holders(%q): %v", res, err)
	}
	return h
}

// keyHolding returns how many of the nodes store value under key (a raw key, whatever the
// prefix).
func keyHolding(t testing.TB, nodes []string, key, value string) int {
	t.Helper()
	n := 0
	for _, u := range nodes {
		v, err := respDo(addrOf(u), "GET", key)
		if err != nil {
			t.Fatalf("GET %q on %s: %v", key, u, err)
		}
		if v == value {
			n++
		}
	}
	return n
}

// A labelled plain lock: free before, then held on every node by the lock's value with the
// label, held for at least the time slept, a TTL within the lock's, and free after Unlock.
func TestHoldersLabelledLock(t *testing.T) {
	t.Parallel()
	const label = "billing-7:4242"
	holderM := newManager(t, sharedNodes, redlock.WithLabel(label))
	watcher := newManager(t, sharedNodes)
	res := uniq(t)

	free := holdersOf(t, watcher, res)
	if free.IsLocked() || free.HeldOn() != 0 || free.Failed() != 0 || free.Quorum != 2 ||
		free.Resource != res || len(free.Nodes) != 3 {
		t.Fatalf("before the lock: %+v", free)
	}
	for i, n := range free.Nodes {
		if n.Index != i || n.State != redlock.HoldFree || n.Kind != redlock.HolderNone || n.ID != nil ||
			n.Label != "" || n.HeldFor != -1 || n.TTL != -1 {
			t.Fatalf("node %d before the lock: %+v", i, n)
		}
	}
	if h, ok := free.Holder(); ok || h.Kind != redlock.HolderNone || h.ID != nil || h.HeldFor >= 0 || h.TTL >= 0 {
		t.Fatalf("Holder() before the lock: %+v, %v", h, ok)
	}

	l, err := holderM.TryLock(res, 10*time.Second)
	wantNoErr(t, "TryLock", err)
	defer l.Free()
	if !strings.HasPrefix(l.Value(), l.Token()+".") || !strings.HasSuffix(l.Value(), " "+label) {
		t.Fatalf("Value() = %q, want %q, a dot, Unix ms, a space and %q", l.Value(), l.Token(), label)
	}
	if !eventually(settle, func() bool { return holding(t, sharedNodes, res, l.Value()) == 3 }) {
		t.Fatal("the third node never stored the lock's value")
	}
	const slept = 300 * time.Millisecond
	time.Sleep(slept)

	seen := holdersOf(t, watcher, res)
	h, ok := seen.Holder()
	if !ok || !seen.IsLocked() || seen.HeldOn() != 3 || seen.Failed() != 0 {
		t.Fatalf("while held: IsLocked %v, HeldOn %d, Failed %d", seen.IsLocked(), seen.HeldOn(), seen.Failed())
	}
	if h.Kind != redlock.HolderLock || string(h.ID) != l.Value() || h.Label != label {
		t.Fatalf("Holder() = kind %v, ID %q, label %q; want lock, %q, %q", h.Kind, h.ID, h.Label, l.Value(), label)
	}
	// The value's time and the node's clock are this machine's wall clock: at least the time
	// slept since the attempt started (less a little for the clocks' rounding).
	if h.HeldFor < slept-50*time.Millisecond || h.HeldFor > time.Minute {
		t.Fatalf("HeldFor = %v, want at least about %v", h.HeldFor, slept)
	}
	if h.TTL <= 0 || h.TTL > 10*time.Second || h.TTL%time.Millisecond != 0 {
		t.Fatalf("TTL = %v, want in (0, 10s], whole milliseconds", h.TTL)
	}
	for i, n := range seen.Nodes {
		if n.Index != i || n.State != redlock.HoldHeld || n.Kind != redlock.HolderLock ||
			!bytes.Equal(n.ID, h.ID) || n.Label != label || n.HeldFor < 0 || n.HeldFor > h.HeldFor ||
			n.TTL <= 0 || n.TTL > 10*time.Second {
			t.Fatalf("node %d while held: %+v (quorum's holder %+v)", i, n, h)
		}
	}
	// Holder returns a copy: changing it leaves the snapshot alone.
	h.ID[0] ^= 0xff
	if again, _ := seen.Holder(); string(again.ID) != l.Value() {
		t.Fatal("Holder() shares its ID with the snapshot")
	}

	wantNoErr(t, "Unlock", l.Unlock())
	if !eventually(settle, func() bool {
		after := holdersOf(t, watcher, res)
		return !after.IsLocked() && after.HeldOn() == 0
	}) {
		t.Fatalf("still held after Unlock: %+v", holdersOf(t, watcher, res))
	}
}

// A lock without a label: the value is the token and the time, the Holder's Label empty; a
// label of any script survives the trip.
func TestHoldersLabels(t *testing.T) {
	t.Parallel()
	for _, label := range []string{"", "café-7:42 (worker ☃)", strings.Repeat("x", redlock.MaxLabelLen)} {
		m := newManager(t, sharedNodes, redlock.WithLabel(label))
		res := uniq(t)
		l, err := m.TryLock(res, 10*time.Second)
		wantNoErr(t, "TryLock", err)
		want := "^" + l.Token() + `\.[0-9]{13}`
		if label != "" {
			want += " " + regexp.QuoteMeta(label)
		}
		if !regexp.MustCompile(want + "$").MatchString(l.Value()) {
			t.Fatalf("label %q: Value() = %q", label, l.Value())
		}
		h, ok := holdersOf(t, m, res).Holder()
		if !ok || h.Label != label || string(h.ID) != l.Value() {
			t.Fatalf("label %q: Holder() = %+v, %v", label, h, ok)
		}
		wantNoErr(t, "Unlock", l.Unlock())
		l.Free()
	}
}

// A reentrant lock is reported by its owner id, held since its tenure began (a re-entry does
// not restart it); its Value is its token.
func TestHoldersReentrant(t *testing.T) {
	t.Parallel()
	m := newManager(t, sharedNodes, redlock.WithLabel("ignored-for-reentrant"))
	res := uniq(t)
	first, err := m.TryLock(res, 10*time.Second, redlock.WithOwner("job-17"))
	wantNoErr(t, "TryLock", err)
	defer first.Free()
	if first.Value() != first.Token() {
		t.Fatalf("a reentrant lock's Value() = %q, want its token %q", first.Value(), first.Token())
	}
	const slept = 300 * time.Millisecond
	time.Sleep(slept)
	second, err := m.TryLock(res, 10*time.Second, redlock.WithOwner("job-17"))
	wantNoErr(t, "re-entry", err)
	defer second.Free()

	h, ok := holdersOf(t, m, res).Holder()
	if !ok || h.Kind != redlock.HolderReentrant || string(h.ID) != "job-17" || h.Label != "job-17" {
		t.Fatalf("Holder() = %+v, %v; want reentrant, job-17", h, ok)
	}
	// The tenure's start is read on the node's own clock.
	if h.HeldFor < slept-50*time.Millisecond || h.HeldFor > time.Minute || h.TTL <= 0 || h.TTL > 10*time.Second {
		t.Fatalf("HeldFor %v, TTL %v: want at least about %v, and in (0, 10s]", h.HeldFor, h.TTL, slept)
	}
	wantNoErr(t, "Unlock (second)", second.Unlock())
	if h, ok := holdersOf(t, m, res).Holder(); !ok || string(h.ID) != "job-17" {
		t.Fatalf("after the first of two unlocks: %+v, %v; want still held by job-17", h, ok)
	}
	wantNoErr(t, "Unlock (first)", first.Unlock())
	if !eventually(settle, func() bool { return !holdersOf(t, m, res).IsLocked() }) {
		t.Fatal("still locked after the owner's last Unlock")
	}
}

// A killed node is reported failed while the quorum still names the holder; with a second one
// killed no quorum agrees on anything, and the snapshot is still no error.
func TestHoldersKilledNode(t *testing.T) {
	t.Parallel()
	servers := startCluster(t, 3)
	nodes := urls(servers)
	m := newManager(t, nodes, redlock.WithLabel("a"))
	res := uniq(t)
	l, err := m.TryLock(res, 30*time.Second)
	wantNoErr(t, "TryLock", err)
	defer l.Free()
	if !eventually(settle, func() bool { return holding(t, nodes, res, l.Value()) == 3 }) {
		t.Fatal("the third node never stored the lock's value")
	}

	servers[2].kill()
	seen := holdersOf(t, m, res)
	if seen.Failed() != 1 || seen.HeldOn() != 2 || seen.Nodes[2].State != redlock.HoldFailed ||
		seen.Nodes[2].Kind != redlock.HolderNone || seen.Nodes[2].ID != nil {
		t.Fatalf("one node killed: %+v", seen.Nodes)
	}
	if h, ok := seen.Holder(); !ok || h.Label != "a" || string(h.ID) != l.Value() {
		t.Fatalf("one node killed: Holder() = %+v, %v", h, ok)
	}

	servers[1].kill()
	seen = holdersOf(t, m, res)
	if seen.IsLocked() || seen.HeldOn() != 1 || seen.Failed() != 2 {
		t.Fatalf("two nodes killed: IsLocked %v, HeldOn %d, Failed %d", seen.IsLocked(), seen.HeldOn(), seen.Failed())
	}
	if h, ok := seen.Holder(); ok || h.Kind != redlock.HolderNone {
		t.Fatalf("two nodes killed: Holder() = %+v, %v", h, ok)
	}
	if n := seen.Nodes[0]; n.State != redlock.HoldHeld || string(n.ID) != l.Value() {
		t.Fatalf("the live node: %+v", n)
	}
}

// A manager whose every node is unreachable still gets a snapshot: every node failed.
func TestHoldersUnreachable(t *testing.T) {
	t.Parallel()
	m := newManager(t, []string{"redis://127.0.0.1:1", "redis://127.0.0.1:2", "redis://127.0.0.1:3"})
	h, err := m.Holders("anything")
	wantNoErr(t, "Holders", err)
	if h.IsLocked() || h.Failed() != 3 || h.HeldOn() != 0 {
		t.Fatalf("unreachable nodes: %+v", h)
	}
}

// node-redlock (v5) and redsync name a lock's key after the resource, store a random value
// with SET … NX PX (node-redlock: after checking that no key exists), and release with a
// compare-and-delete. These do the same by hand.
const (
	peerAcquire = "if redis.call('exists', KEYS[1]) == 1 then return 0 end " +
		"redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1"
	peerRelease = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"
)

// peer runs one of those scripts on every node and returns the sum of the replies: how many
// nodes acquired (or released).
func peer(t testing.TB, nodes []string, script, key, value string, ttl time.Duration) int {
	t.Helper()
	sum := 0
	for _, u := range nodes {
		v, err := respDo(addrOf(u), "EVAL", script, "1", key, value, strconv.FormatInt(ttl.Milliseconds(), 10))
		if err != nil {
			t.Fatalf("EVAL on %s: %v", u, err)
		}
		n, ok := v.(int64)
		if !ok {
			t.Fatalf("EVAL on %s: reply %#v", u, v)
		}
		sum += int(n)
	}
	return sum
}

func randomHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// With the empty prefix, a lock and node-redlock's (or redsync's) on the same key exclude each
// other both ways, and neither release touches the other's key.
func TestKeyPrefixEmptySharesNodeRedlockKeys(t *testing.T) {
	t.Parallel()
	m := newManager(t, sharedNodes, redlock.WithKeyPrefix(""), redlock.WithLabel("new-svc"),
		redlock.WithRetry(0, 0))
	res := uniq(t) // the key itself, as node-redlock names it
	theirs := randomHex(t, 16)

	// The old service holds it the node-redlock way: we are refused, and see a holder that is
	// not ours.
	if n := peer(t, sharedNodes, peerAcquire, res, theirs, 10*time.Second); n != 3 {
		t.Fatalf("node-redlock's acquisition on %d nodes", n)
	}
	_, err := m.TryLock(res, 10*time.Second)
	wantIs(t, "TryLock while node-redlock holds it", err, redlock.ErrNotAcquired)
	h, ok := holdersOf(t, m, res).Holder()
	if !ok || h.Kind != redlock.HolderOther || string(h.ID) != theirs || h.Label != "" || h.HeldFor >= 0 ||
		h.TTL <= 0 || h.TTL > 10*time.Second {
		t.Fatalf("Holder() of node-redlock's key = %+v, %v", h, ok)
	}
	if n := keyHolding(t, sharedNodes, res, theirs); n != 3 {
		t.Fatalf("our refused attempt disturbed their key: on %d nodes", n)
	}
	if n := peer(t, sharedNodes, peerRelease, res, theirs, 0); n != 3 {
		t.Fatalf("node-redlock's release on %d nodes", n)
	}

	// Now we hold it, under the bare resource name: their acquisition is refused, their
	// release (of their own value) deletes nothing, redsync's SET NX is refused.
	l, err := m.TryLock(res, 10*time.Second)
	wantNoErr(t, "TryLock after their release", err)
	defer l.Free()
	if !eventually(settle, func() bool { return keyHolding(t, sharedNodes, res, l.Value()) == 3 }) {
		t.Fatal("our value never reached every node under the bare resource name")
	}
	if n := present(t, sharedNodes, res); n != 0 { // present looks under "redlock:"
		t.Fatalf("the empty prefix still wrote redlock:%s on %d nodes", res, n)
	}
	if n := peer(t, sharedNodes, peerAcquire, res, theirs, 10*time.Second); n != 0 {
		t.Fatalf("node-redlock acquired our lock on %d nodes", n)
	}
	if n := peer(t, sharedNodes, peerRelease, res, theirs, 0); n != 0 {
		t.Fatalf("node-redlock's release deleted our key on %d nodes", n)
	}
	for _, u := range sharedNodes {
		if v, err := respDo(addrOf(u), "SET", res, "cmVkc3luYw==", "NX", "PX", "10000"); err != nil || v != nil {
			t.Fatalf("redsync's SET NX on %s: %#v, %v; want refused", u, v, err)
		}
	}
	if n := keyHolding(t, sharedNodes, res, l.Value()); n != 3 {
		t.Fatalf("after their attempts our value is on %d nodes", n)
	}
	if h, ok := holdersOf(t, m, res).Holder(); !ok || h.Kind != redlock.HolderLock || h.Label != "new-svc" {
		t.Fatalf("Holder() of our lock = %+v, %v", h, ok)
	}

	// Our release frees it for them.
	wantNoErr(t, "Unlock", l.Unlock())
	if !eventually(settle, func() bool { return keyHolding(t, sharedNodes, res, l.Value()) == 0 }) {
		t.Fatal("our value outlived Unlock")
	}
	if n := peer(t, sharedNodes, peerAcquire, res, theirs, 10*time.Second); n != 3 {
		t.Fatalf("node-redlock's acquisition after our release on %d nodes", n)
	}
	if n := peer(t, sharedNodes, peerRelease, res, theirs, 0); n != 3 {
		t.Fatalf("node-redlock's final release on %d nodes", n)
	}
}

// Another string key of any length is reported whole (longer than the binding's pooled
// buffer, so read again into memory of its size).
func TestHoldersLongOtherValue(t *testing.T) {
	t.Parallel()
	m := newManager(t, sharedNodes, redlock.WithKeyPrefix(""))
	res := uniq(t)
	long := strings.Repeat(randomHex(t, 8), 1000) // 16000 bytes
	for _, u := range sharedNodes {
		if _, err := respDo(addrOf(u), "SET", res, long); err != nil { // no expiry
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = respDo(addrOf(u), "DEL", res) })
	}
	h, ok := holdersOf(t, m, res).Holder()
	if !ok || h.Kind != redlock.HolderOther || string(h.ID) != long || h.TTL != -1 || h.HeldFor != -1 {
		t.Fatalf("Holder() = kind %v, %d-byte ID, TTL %v, HeldFor %v, %v", h.Kind, len(h.ID), h.TTL, h.HeldFor, ok)
	}
}

// A key prefix names the keys; another prefix is another namespace.
func TestKeyPrefixNamesTheKeys(t *testing.T) {
	t.Parallel()
	app := newManager(t, sharedNodes, redlock.WithKeyPrefix("app:locks:"), redlock.WithRetry(0, 0))
	def := newManager(t, sharedNodes, redlock.WithRetry(0, 0))
	res := uniq(t)
	a, err := app.TryLock(res, 10*time.Second)
	wantNoErr(t, "TryLock under app:locks:", err)
	defer a.Free()
	if !eventually(settle, func() bool { return keyHolding(t, sharedNodes, "app:locks:"+res, a.Value()) == 3 }) {
		t.Fatal("the lock never reached every node under app:locks:")
	}
	if h := holdersOf(t, def, res); h.IsLocked() || h.HeldOn() != 0 {
		t.Fatalf("the default prefix sees the app:locks: lock: %+v", h)
	}
	b, err := def.TryLock(res, 10*time.Second)
	wantNoErr(t, "TryLock under the default prefix", err)
	defer b.Free()
	_, err = app.TryLock(res, time.Second)
	wantIs(t, "a second TryLock under app:locks:", err, redlock.ErrNotAcquired)
	if h, ok := holdersOf(t, app, res).Holder(); !ok || string(h.ID) != a.Value() {
		t.Fatalf("app's Holder() = %+v, %v; want its own lock", h, ok)
	}
	wantNoErr(t, "Unlock a", a.Unlock())
	wantNoErr(t, "Unlock b", b.Unlock())
}

func TestHoldersInvalidInput(t *testing.T) {
	t.Parallel()
	nodes := []string{"redis://127.0.0.1:1"} // nothing listens: nothing must be sent
	for _, label := range []string{"a\nb", "tab\there", "nul\x00", "del\x7f", "c1\u0085", "bad utf-8 \xff",
		strings.Repeat("x", redlock.MaxLabelLen+1), strings.Repeat("é", redlock.MaxLabelLen/2) + "x"} {
		_, err := redlock.New(nodes, redlock.WithLabel(label))
		wantIs(t, "WithLabel("+strconv.Quote(label)+")", err, redlock.ErrInvalidArgument)
		// The eager check matches the library's: a bad label never reaches C.
		if _, err := redlock.New(nil, redlock.WithLabel(label)); !strings.Contains(err.Error(), "label") {
			t.Fatalf("WithLabel(%q) is not checked before the nodes: %v", label, err)
		}
	}
	_, err := redlock.New(nodes, redlock.WithKeyPrefix(strings.Repeat("p", redlock.MaxKeyPrefixLen+1)))
	wantIs(t, "WithKeyPrefix too long", err, redlock.ErrInvalidArgument)
	// Allowed: the longest label and prefix, no label, a prefix of any bytes.
	for _, opt := range []redlock.Option{
		redlock.WithLabel(strings.Repeat("x", redlock.MaxLabelLen)),
		redlock.WithLabel(""),
		redlock.WithKeyPrefix(strings.Repeat("p", redlock.MaxKeyPrefixLen)),
		redlock.WithKeyPrefix("\x00\xff\r\n"),
	} {
		m, err := redlock.New(nodes, opt)
		wantNoErr(t, "New with a valid label or prefix", err)
		m.Close()
	}

	bare := newManager(t, nodes, redlock.WithKeyPrefix(""))
	for _, res := range []string{"", "redlock-marker", "redlock-fence:x", strings.Repeat("r", redlock.MaxResourceLen+1)} {
		_, err := bare.Holders(res)
		wantIs(t, "Holders("+strconv.Quote(res[:min(len(res), 20)])+")", err, redlock.ErrInvalidArgument)
		_, err = bare.TryLock(res, time.Second)
		wantIs(t, "TryLock("+strconv.Quote(res[:min(len(res), 20)])+")", err, redlock.ErrInvalidArgument)
	}
	def := newManager(t, nodes)
	_, err = def.Holders("")
	wantIs(t, "Holders(\"\")", err, redlock.ErrInvalidArgument)
	def.Close()
	_, err = def.Holders("x")
	wantIs(t, "Holders after Close", err, redlock.ErrClosed)
	var nilM *redlock.Manager
	_, err = nilM.Holders("x")
	wantIs(t, "Holders on a nil Manager", err, redlock.ErrNullArgument)
	var nilH *redlock.Holders
	if _, ok := nilH.Holder(); ok || nilH.IsLocked() || nilH.HeldOn() != 0 || nilH.Failed() != 0 {
		t.Fatal("a nil *Holders")
	}
	var nilL *redlock.Lock
	if nilL.Value() != "" {
		t.Fatal("a nil Lock's Value")
	}
}

func TestHoldersStrings(t *testing.T) {
	for _, c := range []struct {
		v    interface{ String() string }
		want string
	}{
		{redlock.HoldFree, "free"},
		{redlock.HoldHeld, "held"},
		{redlock.HoldFailed, "failed"},
		{redlock.HoldState(7), "HoldState(7)"},
		{redlock.HolderNone, "none"},
		{redlock.HolderLock, "lock"},
		{redlock.HolderReentrant, "reentrant"},
		{redlock.HolderOther, "other"},
		{redlock.HolderKind(9), "HolderKind(9)"},
	} {
		if got := c.v.String(); got != c.want {
			t.Errorf("%#v.String() = %q, want %q", c.v, got, c.want)
		}
	}
}
