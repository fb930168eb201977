package policies

import "path/filepath"

// InWorkspace reports whether path is inside workspace (or is it), judged
// by where the kernel would reach (SPEC §4.1 `in_workspace`): symlinks are
// resolved element by element before `..` is applied, a dangling link
// counts as its target, and the part of the path that does not exist yet is
// appended to the resolved prefix. A relative path is taken relative to base
// (the step's cwd).
func InWorkspace(path, workspace, base string) bool {
	if path == "" || workspace == "" {
		return false
	}
	if !filepath.IsAbs(path) {
		// Not filepath.Join: it would clean `link/..` away before the
		// link is resolved.
		path = base + "/" + path
	}
	return inside(path, workspace)
}
