//go:build unix

package wire

import (
	"os/exec"
	"syscall"
)

// setProcessGroup puts the engine in its own process group, so a kill
// reaches whatever it started.
func setProcessGroup(c *exec.Cmd) { c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// killProcess kills the engine's process group (what it started and left
// running, even after the engine itself exited) and the engine.
func killProcess(c *exec.Cmd) {
	if c.Process == nil {
		return
	}
	_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	_ = c.Process.Kill()
}

// terminateProcess asks the engine's process group to end (SIGTERM).
func terminateProcess(c *exec.Cmd) {
	if c.Process != nil {
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGTERM)
	}
}
