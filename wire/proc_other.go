//go:build !unix

package wire

import "os/exec"

func setProcessGroup(*exec.Cmd) {}

func killProcess(c *exec.Cmd) {
	if c.Process != nil {
		_ = c.Process.Kill()
	}
}

func terminateProcess(c *exec.Cmd) { killProcess(c) }
