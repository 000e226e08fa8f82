//go:build cgo && !redlock_dynamic

package redlock

// Static linking (the default): the Rust library's archive is linked into the Go binary, which
// then needs no libredlock.so at run time. Build the archive first with
// `cargo build --release` at the repository root.

// #cgo LDFLAGS: ${SRCDIR}/../../target/release/libredlock.a -lpthread -ldl -lm
import "C"

// linkMode says how the library was linked; see LinkMode.
const linkMode = "static"
