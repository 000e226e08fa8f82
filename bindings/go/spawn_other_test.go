//go:build !linux

package redlock_test

import "os/exec"

func startProcess(cmd *exec.Cmd) error { return cmd.Start() }
