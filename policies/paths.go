package policies

import (
	"os"
	"path/filepath"
	"strings"
)

// InWorkspace reports whether path is inside workspace (or is it), judged
// by where the kernel would reach once a tool has created the missing parent
// directories (docs/policies.md#permission-policies `in_workspace`): symlinks are resolved element by
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

// Under reports whether path is dir or inside it (the rule helper `under`).
//
// Two absolute paths are judged as docs/policies.md#permission-policies judges `in_workspace`: by the
// paths the kernel would reach once a tool has created the missing parent
// directories: symlinks resolved wherever they exist, and a `..` after a
// missing element back in the real directory it would be created in, so
// neither `..` nor a symlink pointing elsewhere leads out of dir (see
// resolvePath).
//
// # Notes
//
// Two relative paths are compared after cleaning only, without touching the
// file system: acpflow's own working directory means nothing to a rule, so
// `under("src/a.go", "src")` is true and `under("src/../x", "src")` false. An
// absolute path is never under a relative dir nor the reverse, and an empty
// path or dir is under nothing.
func Under(path, dir string) bool {
	if path == "" || dir == "" {
		return false
	}
	switch absP, absD := filepath.IsAbs(path), filepath.IsAbs(dir); {
	case absP && absD:
		return inside(path, dir)
	case absP || absD:
		return false
	}
	p, d := filepath.Clean(path), filepath.Clean(dir)
	if escapes(p) {
		return false
	}
	if d == "." {
		return true
	}
	return p == d || strings.HasPrefix(p, d+string(filepath.Separator))
}

// inside reports whether the absolute path, resolved, is the absolute dir,
// resolved, or inside it. A path that cannot be resolved (a symlink loop)
// is inside nothing.
func inside(path, dir string) bool {
	p, ok := resolvePath(path)
	if !ok {
		return false
	}
	d, ok := resolvePath(dir)
	if !ok {
		return false
	}
	return p == d || strings.HasPrefix(p, strings.TrimSuffix(d, "/")+"/")
}

// maxSymlinks is how many symlinks resolvePath follows before it calls the
// path a loop, as Linux does (ELOOP after 40).
const maxSymlinks = 40

// resolvePath returns the path the kernel would reach for the absolute path
// p once a tool has created the directories it lacks: each element is taken
// in turn, a symlink is replaced by its target (dangling ones too: creating
// a file through one creates its target), and `..` goes up from where the
// elements before it led. An element that does not exist is taken as the
// directory the tool would create there, so a `..` after it goes back to the
// real directory it would be created in, and the elements after that are
// resolved again.
//
// # Notes
//
// Cleaning before resolving would be wrong: with ws/escape -> ../outside,
// `ws/escape/../src` is `outside/../src`, i.e. next to ws, not ws/src. And
// stopping at the first missing element would be wrong too: with ws/link ->
// /outside, `ws/missing/../link/f` is /outside/f once ws/missing exists.
// ok is false for a symlink loop: the kernel would fail too, and nothing
// should be judged inside a directory on a path that leads nowhere. An
// element that cannot be read (no permission) counts as missing.
func resolvePath(p string) (resolved string, ok bool) {
	elems := strings.Split(p, "/")
	cur := "/"
	links := 0
	for i := 0; i < len(elems); i++ {
		switch e := elems[i]; e {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, elems[i])
		fi, err := os.Lstat(next)
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > maxSymlinks {
			return "", false
		}
		target, err := os.Readlink(next)
		if err != nil {
			cur = next
			continue
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		elems = append(strings.Split(target, "/"), elems[i+1:]...)
		i = -1
	}
	return cur, true
}

// escapes reports whether a cleaned relative path leads out of its base.
func escapes(p string) bool {
	return p == ".." || strings.HasPrefix(p, ".."+string(filepath.Separator))
}
