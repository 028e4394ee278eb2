//go:build !unix

package mutants

import (
	"os"
	"os/exec"
)

func ownGroup(*exec.Cmd) {}

func interrupt(cmd *exec.Cmd) error { return cmd.Process.Signal(os.Interrupt) }
