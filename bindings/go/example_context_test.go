package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	redlock "github.com/redlock-quorum/redlock/bindings/go"
)

// LockContext waits until its context ends: woken when the holder releases the lock, it gets
// it at once; a cancelled context ends the wait with ErrCancelled (which matches
// context.Canceled too), a deadline with ErrNotAcquired (which matches
// context.DeadlineExceeded), leaving no key behind.
func ExampleManager_LockContext() {
	nodes := strings.Split(os.Getenv("REDLOCK_NODES"), ",")
	m, err := redlock.New(nodes, redlock.WithTimeouts(time.Second, 500*time.Millisecond))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()

	first, err := m.TryLock("example:lock-context", 10*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer first.Free()

	// Cancelled while it waits (here after 100 ms; typically a request that went away).
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(100 * time.Millisecond)
		cancel()
	}()
	_, err = m.LockContext(ctx, "example:lock-context", 10*time.Second)
	fmt.Println("cancelled:", errors.Is(err, redlock.ErrCancelled), errors.Is(err, context.Canceled))

	// A deadline that passes while the lock is still held.
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = m.LockContext(ctx, "example:lock-context", 10*time.Second)
	fmt.Println("deadline:", errors.Is(err, redlock.ErrNotAcquired), errors.Is(err, context.DeadlineExceeded))

	// Released while it waits: woken by the release.
	go func() {
		time.Sleep(100 * time.Millisecond)
		_ = first.Unlock()
	}()
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	second, err := m.LockContext(ctx, "example:lock-context", 10*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer second.Free()
	fmt.Println("got it after the release:", second.Valid())
	fmt.Println("unlock:", second.Unlock())
	// Output:
	// cancelled: true true
	// deadline: true true
	// got it after the release: true
	// unlock: <nil>
}
