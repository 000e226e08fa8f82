package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	redlock "github.com/redlock-quorum/redlock/bindings/go"
)

func init() {
	childRoles["reentrant-try"] = childReentrantTry
}

// childReentrantTry makes one attempt on $REDLOCK_TEST_RESOURCE with owner
// $REDLOCK_TEST_OWNER and prints "granted" or "refused"; it exits without unlocking.
func childReentrantTry() int {
	m, err := redlock.New(strings.Split(os.Getenv("REDLOCK_TEST_NODES"), ","))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	l, err := m.TryLock(os.Getenv("REDLOCK_TEST_RESOURCE"), 10*time.Second,
		redlock.WithOwner(os.Getenv("REDLOCK_TEST_OWNER")))
	switch {
	case err == nil:
		fmt.Println("granted")
		l.Free()
	case errors.Is(err, redlock.ErrNotAcquired):
		fmt.Println("refused")
	default:
		fmt.Println("error", err)
		return 1
	}
	return 0
}

func tryInChild(t *testing.T, res, owner string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"=reentrant-try", "REDLOCK_TEST_NODES="+strings.Join(sharedNodes, ","),
		"REDLOCK_TEST_RESOURCE="+res, "REDLOCK_TEST_OWNER="+owner)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v (%s)", err, out)
	}
	return strings.TrimSpace(string(out))
}

// holds counts the hold fields of the resource's key on each node.
func holds(t testing.TB, res string) []int {
	var n []int
	for _, node := range sharedNodes {
		v, err := respDo(addrOf(node), "HKEYS", lockKey(res))
		if err != nil {
			t.Fatalf("HKEYS: %v", err)
		}
		fields, _ := v.([]any)
		k := 0
		for _, f := range fields {
			if s, ok := f.(string); ok && strings.HasPrefix(s, "hold:") {
				k++
			}
		}
		n = append(n, k)
	}
	return n
}

// The same owner re-enters at once, from this goroutine, another one and another process; another
// owner is refused until the owner's last Lock is unlocked; a fenced tenure keeps its token.
func TestReentrantOwner(t *testing.T) {
	t.Parallel()
	m := newManager(t, sharedNodes)
	other := newManager(t, sharedNodes)
	res := uniq(t)
	var locks []*redlock.Lock
	for i := 0; i < 10; i++ {
		l, err := m.TryLock(res, 10*time.Second, redlock.WithOwner("job-1"), redlock.Fenced())
		wantNoErr(t, "TryLock with the owner", err)
		locks = append(locks, l)
	}
	for _, l := range locks[1:] {
		if l.FencingToken() != locks[0].FencingToken() || l.Token() == locks[0].Token() {
			t.Fatalf("re-entry: token %d vs %d, hold %s vs %s", l.FencingToken(), locks[0].FencingToken(), l.Token(), locks[0].Token())
		}
	}
	// LockContext takes the owner too.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	lc, err := m.LockContext(ctx, res, 10*time.Second, redlock.WithOwner("job-1"))
	cancel()
	wantNoErr(t, "LockContext with the owner", err)
	wantNoErr(t, "Unlock", lc.Unlock())
	lc.Free()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, err := other.TryLock(res, 10*time.Second, redlock.WithOwner("job-2"))
		if !errors.Is(err, redlock.ErrNotAcquired) {
			t.Errorf("another owner in another goroutine: %v", err)
		}
		l, err := other.TryLock(res, 10*time.Second, redlock.WithOwner("job-1"))
		if err != nil {
			t.Errorf("the same owner in another goroutine: %v", err)
			return
		}
		if err := l.Unlock(); err != nil {
			t.Errorf("Unlock: %v", err)
		}
		l.Free()
	}()
	wg.Wait()
	if got := tryInChild(t, res, "job-2"); got != "refused" {
		t.Fatalf("another owner in another process: %s", got)
	}
	if _, err := other.TryLock(res, 10*time.Second); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("a plain lock while the owner holds it: %v", err)
	}
	// Unlock out of order: held until the last one.
	for _, i := range []int{7, 2, 9, 0, 5, 1, 8, 3, 6} {
		wantNoErr(t, "Unlock", locks[i].Unlock())
		locks[i].Free()
	}
	if h := holds(t, res); h[0] != 1 || h[1] != 1 || h[2] != 1 {
		t.Fatalf("holds after 9 of 10 unlocks: %v", h)
	}
	if _, err := other.TryLock(res, 10*time.Second, redlock.WithOwner("job-2")); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("another owner before the last unlock: %v", err)
	}
	wantNoErr(t, "the last Unlock", locks[4].Unlock())
	locks[4].Free()
	if !eventually(5*time.Second, func() bool { return present(t, sharedNodes, res) == 0 }) {
		t.Fatal("the key is still there after the last Unlock")
	}
	// A restarted process presenting the owner reclaims the lock at once.
	if got := tryInChild(t, res, "job-3"); got != "granted" {
		t.Fatalf("child with job-3: %s", got)
	}
	if got := tryInChild(t, res, "job-3"); got != "granted" {
		t.Fatalf("a second child with the same owner: %s", got)
	}
	if got := tryInChild(t, res, "job-4"); got != "refused" {
		t.Fatalf("child with another owner: %s", got)
	}
}

func TestReentrantBadOwner(t *testing.T) {
	t.Parallel()
	m := newManager(t, sharedNodes)
	for _, owner := range []string{"", strings.Repeat("o", redlock.MaxOwnerLen+1)} {
		_, err := m.TryLock(uniq(t), time.Second, redlock.WithOwner(owner))
		wantIs(t, fmt.Sprintf("owner of %d bytes", len(owner)), err, redlock.ErrInvalidArgument)
	}
	l, err := m.Acquire(uniq(t), time.Second, redlock.WithOwner("\x00\xff"), redlock.Wait(time.Second))
	wantNoErr(t, "Acquire with a binary owner", err)
	wantNoErr(t, "Unlock", l.Unlock())
	l.Free()
}
