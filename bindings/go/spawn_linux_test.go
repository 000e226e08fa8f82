//go:build linux

package redlock_test

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// On Linux every redis-server is started with a parent-death signal, so that none outlives
// the test binary even if it is killed (a -timeout panic skips TestMain's teardown). The
// signal follows the thread that forked the child, not the process, so all servers are
// forked from one goroutine locked to its OS thread for the life of the process.

type spawnJob struct {
	cmd  *exec.Cmd
	errc chan error
}

var (
	spawnJobs = make(chan spawnJob)
	spawnOnce sync.Once
)

func spawner() {
	runtime.LockOSThread() // never unlocked, never returns: the thread lives until exit
	for job := range spawnJobs {
		job.errc <- job.cmd.Start()
	}
}

func startProcess(cmd *exec.Cmd) error {
	spawnOnce.Do(func() { go spawner() })
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	job := spawnJob{cmd: cmd, errc: make(chan error, 1)}
	spawnJobs <- job
	return <-job.errc
}
