package redlock

// #cgo CFLAGS: -I${SRCDIR}/../../include
// #include <stdlib.h>
// #include "redlock.h"
import "C"

import (
	"math"
	"runtime"
	"sync"
	"time"
	"unsafe"
)

// The cgo plumbing every call shares: the C error buffer and the pooled scratch memory that
// carries it and a resource name, C copies of several names, durations converted to the
// C ABI's milliseconds, and the library's status turned into an error.

// errBufLen is the size of the C error buffer passed to every fallible call. Messages longer
// than this are truncated by the library (at a character boundary).
const errBufLen = 4096

// millis converts d to whole milliseconds for the C ABI, rounding up: a positive duration never
// becomes 0, and the library never gets less than was asked for. ok is false when d is
// negative or the result does not fit in a uint32.
func millis(d time.Duration) (ms uint32, ok bool) {
	if d < 0 {
		return 0, false
	}
	n := d / time.Millisecond
	if d%time.Millisecond != 0 {
		n++
	}
	if n > math.MaxUint32 {
		return 0, false
	}
	return uint32(n), true
}

// ttlMillis checks a TTL in Go (> 0, at most MaxTTL after rounding up) and converts it.
func ttlMillis(ttl time.Duration) (C.uint32_t, error) {
	if ttl <= 0 {
		return 0, invalidf("TTL must be > 0, got %v", ttl)
	}
	ms, ok := millis(ttl)
	if !ok {
		return 0, invalidf("TTL %v exceeds the maximum of %v", ttl, MaxTTL)
	}
	return C.uint32_t(ms), nil
}

// cScratch is C memory for one call: the error buffer, followed by a copy of the resource.
// Passing C memory (rather than Go memory) keeps every call clean under the cgo pointer
// checks, and nothing the library reads can be moved or collected during a call that blocks.
//
// The buffers are pooled (scratchPool), so the hot path (Acquire, Unlock) does no C.malloc or
// C.free: each buffer is made once, reused, and freed by a finalizer on its Go wrapper when
// the pool drops it at a garbage collection.
type cScratch struct {
	buf *cBuf
	err *C.char
	res *C.uint8_t // nil when the resource is empty
	n   C.size_t   // resource length
}

// scratchLen is the size of a pooled buffer: the error buffer and the longest resource.
const scratchLen = errBufLen + MaxResourceLen

// cBuf owns scratchLen bytes of C memory, freed by its finalizer.
type cBuf struct{ p unsafe.Pointer }

var scratchPool = sync.Pool{New: func() any {
	b := &cBuf{p: C.malloc(scratchLen)} // cgo's malloc never returns nil (it aborts)
	runtime.SetFinalizer(b, func(b *cBuf) { C.free(b.p) })
	return b
}}

// newScratch takes a buffer from the pool and copies resource (at most MaxResourceLen bytes,
// which every caller checks first) after the error buffer.
func newScratch(resource string) cScratch {
	if len(resource) > MaxResourceLen {
		panic("redlock: internal error: resource longer than MaxResourceLen reached newScratch")
	}
	b := scratchPool.Get().(*cBuf)
	s := cScratch{buf: b, err: (*C.char)(b.p), n: C.size_t(len(resource))}
	*s.err = 0
	if len(resource) > 0 {
		p := unsafe.Add(b.p, errBufLen)
		copy(unsafe.Slice((*byte)(p), len(resource)), resource)
		s.res = (*C.uint8_t)(p)
	}
	return s
}

// free returns the buffer to the pool.
func (s cScratch) free() { scratchPool.Put(s.buf) }

// statusError turns a non-OK status and the C error buffer into an *Error.
func statusError(st C.enum_redlock_status, errBuf *C.char) error {
	return &Error{Status: Status(st), Message: C.GoString(errBuf)}
}

// newInternal is an *Error with StatusInternal, for a failure the library should never have.
func newInternal(msg string) error {
	return &Error{Status: StatusInternal, Message: "internal error: " + msg}
}

// cNames is C memory holding the resource names of a redlock_acquire_many call, made for the
// call in one allocation: n pointers (NULL for an empty name), n lengths, then the bytes.
type cNames struct {
	p    unsafe.Pointer
	ptrs **C.uint8_t
	lens *C.size_t
	n    C.size_t
}

// newCNames copies names (at most MaxResources of them, which every caller checks first: the
// bound on the C memory a call makes) into C memory. No names: NULL arrays of count 0, which
// the library refuses with its own message.
func newCNames(names []string) cNames {
	n := len(names)
	if n > MaxResources {
		panic("redlock: internal error: a resource count out of range reached newCNames")
	}
	if n == 0 {
		return cNames{}
	}
	total := 0
	for _, r := range names {
		total += len(r)
	}
	const ptrSize, lenSize = unsafe.Sizeof((*C.uint8_t)(nil)), unsafe.Sizeof(C.size_t(0))
	p := C.malloc(C.size_t(uintptr(n)*(ptrSize+lenSize) + uintptr(total))) // never nil (cgo aborts)
	ptrs := unsafe.Slice((**C.uint8_t)(p), n)
	lens := unsafe.Slice((*C.size_t)(unsafe.Add(p, uintptr(n)*ptrSize)), n)
	data := unsafe.Add(p, uintptr(n)*(ptrSize+lenSize))
	for i, r := range names {
		lens[i], ptrs[i] = C.size_t(len(r)), nil
		if len(r) > 0 {
			copy(unsafe.Slice((*byte)(data), len(r)), r)
			ptrs[i] = (*C.uint8_t)(data)
			data = unsafe.Add(data, len(r))
		}
	}
	return cNames{p: p, ptrs: &ptrs[0], lens: &lens[0], n: C.size_t(n)}
}

func (c cNames) free() {
	if c.p != nil {
		C.free(c.p)
	}
}

// withCString calls f with a C copy of v (NUL-terminated: v holds no NUL, which every caller
// checks first), freed after the call.
func withCString(v string, f func(*C.char) C.enum_redlock_status) C.enum_redlock_status {
	cv := C.CString(v)
	defer C.free(unsafe.Pointer(cv))
	return f(cv)
}

// withCBytes calls f with a C copy of v's bytes and their count, freed after the call: NULL
// with count 0 for the empty string.
func withCBytes(v string, f func(*C.uint8_t, C.size_t) C.enum_redlock_status) C.enum_redlock_status {
	var p unsafe.Pointer
	if v != "" {
		p = C.CBytes([]byte(v))
		defer C.free(p)
	}
	return f((*C.uint8_t)(p), C.size_t(len(v)))
}
