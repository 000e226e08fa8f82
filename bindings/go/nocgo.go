//go:build !cgo

package redlock

// This package wraps a Rust library through cgo. Without cgo (CGO_ENABLED=0, or no C compiler
// on the PATH) the build stops here with an error that names the problem, instead of the
// less helpful "build constraints exclude all Go files".
var _ = redlock_requires_cgo__set_CGO_ENABLED_1_and_install_a_C_compiler
