package steps

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ResolveCwd finds the working directory of a process a step starts: the
// step's with.cwd, else fallback (an agent's cwd; "" for none), else the
// workspace. A relative one is taken against the workspace, never against
// acpflow's own directory. It must be a directory acpflow can enter
// (search permission, access(2) X_OK), checked before anything is spawned
// so that the step fails with the path rather than with the child's exec
// error. Every kind that starts a process shares it, so the rules and the
// messages are one.
func ResolveCwd(inv *Invocation, fallback string) (string, error) {
	cwd := inv.Workspace
	if fallback != "" {
		cwd = fallback
	}
	if s, _ := inv.With["cwd"].(string); s != "" {
		cwd = s
	}
	if !filepath.IsAbs(cwd) {
		cwd = filepath.Join(inv.Workspace, cwd)
	}
	cwd = filepath.Clean(cwd)
	if !filepath.IsAbs(cwd) {
		return "", fmt.Errorf("cwd must be an absolute path: %s", cwd)
	}
	fi, err := os.Stat(cwd)
	switch {
	case os.IsNotExist(err):
		return "", fmt.Errorf("cwd %s does not exist", cwd)
	case err != nil:
		return "", fmt.Errorf("cwd %s cannot be entered: %v", cwd, err)
	case !fi.IsDir():
		return "", fmt.Errorf("cwd %s is not a directory", cwd)
	}
	if err := unix.Access(cwd, unix.X_OK); err != nil {
		return "", fmt.Errorf("cwd %s cannot be entered: %v", cwd, err)
	}
	return cwd, nil
}
