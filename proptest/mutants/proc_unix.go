//go:build unix

package mutants

import (
	"os/exec"
	"syscall"
)

// ownGroup starts cmd in its own process group and makes interrupt reach
// the whole group (go build's compilers, not only go).
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// interrupt sends SIGINT to cmd's process group.
func interrupt(cmd *exec.Cmd) error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) }
