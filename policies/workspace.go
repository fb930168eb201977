package policies

import (
	"path/filepath"
	"strings"
)

// InWorkspace reports whether path is inside workspace (or is it), after
// cleaning and resolving symlinks (SPEC §4.1 `in_workspace`). A path that
// does not exist yet has its longest existing prefix resolved and the rest
// appended, so `ws/link-to-etc/new-file` is judged by where the link points.
// A relative path is taken relative to base (the step's cwd).
func InWorkspace(path, workspace, base string) bool {
	if path == "" || workspace == "" {
		return false
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(base, path)
	}
	p := resolveExisting(filepath.Clean(path))
	ws := resolveExisting(filepath.Clean(workspace))
	if p == ws {
		return true
	}
	return strings.HasPrefix(p, strings.TrimSuffix(ws, string(filepath.Separator))+string(filepath.Separator))
}

// resolveExisting resolves symlinks in the longest prefix of p that exists
// and appends the rest unchanged.
func resolveExisting(p string) string {
	rest := ""
	cur := p
	for {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}
