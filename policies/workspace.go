package policies

import "path/filepath"

// InWorkspace reports whether path is inside workspace (or is it), judged
// by where the kernel would reach once a tool has created the missing parent
// directories (SPEC §4.1 `in_workspace`): symlinks are resolved element by
// element before `..` is applied, a dangling link counts as its target, and
// a `..` after a missing element goes back to the real directory that
// element would be created in, so `ws/missing/../link/f` with link pointing
// outside is outside. A relative path is taken relative to base (the step's
// cwd).
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
