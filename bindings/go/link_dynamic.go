//go:build cgo && redlock_dynamic

package redlock

// Dynamic linking (build tag redlock_dynamic): the binary loads libredlock.so at run time,
// found through an rpath pointing at the repository's target/release directory (or through
// LD_LIBRARY_PATH / the system linker path when the library is installed elsewhere; add
// CGO_LDFLAGS=-L<dir> to link against such a copy).

// #cgo LDFLAGS: -L${SRCDIR}/../../target/release -lredlock -Wl,-rpath,${SRCDIR}/../../target/release
import "C"

// linkMode says how the library was linked; see LinkMode.
const linkMode = "dynamic"
