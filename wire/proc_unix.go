//go:build unix

package wire

import (
	"os/exec"
	"syscall"
)

// setProcessGroup puts the engine in its own process group, so a kill
// reaches whatever it started.
func setProcessGroup(c *exec.Cmd) { c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

func killProcess(c *exec.Cmd) {
	if c.Process == nil {
		return
	}
	_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	_ = c.Process.Kill()
}
