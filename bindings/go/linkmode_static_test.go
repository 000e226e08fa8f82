//go:build !redlock_dynamic

package redlock_test

const wantLinkMode = "static"
