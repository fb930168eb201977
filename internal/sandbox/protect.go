package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/acpflow/acpflow/internal/regularfile"
)

// DefaultProtect is what stays read-only inside every sandbox even where
// it lies beneath a writable path, relative to the user's home: files
// that run what they hold the next time the user opens a shell, logs in
// or runs git or npx, outside any sandbox. Each entry says why.
var DefaultProtect = []string{
	".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", // bash and sh at every shell or login
	".zshrc", ".zshenv", ".zprofile", ".zlogin", ".zlogout", // zsh likewise
	".config/fish",      // fish's config.fish and conf.d
	".config/nushell",   // nushell's config.nu and env.nu
	".inputrc",          // readline macros that type commands
	".gitconfig",        // core.hooksPath, core.fsmonitor, aliases: run by the user's next git
	".config/git",       // git's XDG config and attributes
	".npm/_npx",         // npx's cache: a package planted there runs on the user's next npx
	".local/bin", "bin", // early on many PATHs: a planted git or node runs instead of the real one
	".config/systemd/user", // user services, started at the next login
	".config/autostart",    // desktop autostart entries
}

// gitProtect are the entries of a git dir that hold configuration or
// code: a repository's config, hooks and info (attributes, exclude); a
// linked worktree's admin files, which say where its repository is.
var gitProtect = []string{"config", "hooks", "info", "commondir", "gitdir", "config.worktree"}

// gitMake are the git dir entries created when missing, so that they can
// be kept read-only: git init makes both, and an agent could otherwise
// make them with a hook inside.
var gitMake = []string{"hooks", "info"}

// maxGitDepth is how deep below the cwd and each write: path the launcher
// looks for repositories (the workspace's own .git, a clone in it or in
// a directory of clones); submodules are found wherever they are, through
// .gitmodules. maxGitDirs bounds the directories it reads: the walk is
// part of every sandboxed spawn.
const (
	maxGitDepth = 2
	maxGitDirs  = 500
)

// protection is what the launcher keeps read-only beneath the writable
// paths, and how.
type protection struct {
	// pins are git dirs, each bound onto itself before anything else, so
	// that an agent cannot rename one away and put its own in its place.
	pins []string
	// make are directories to create first (a git dir's hooks and info).
	make []string
	// readOnly are existing paths, each bound read-only onto itself.
	readOnly []string
	// splits are directories that must gain no new entry at their top: a
	// protected path directly or further below them is missing, and a new
	// one would be run all the same (a ~/.bashrc made in a writable HOME).
	// A state dir is never split (inStateDir).
	splits []string
}

// protection works out what s keeps read-only: DefaultProtect against
// each home, Protect, and the configuration of every git dir found near
// the top of a writable path, less the entries Write names exactly.
func (s Spec) protection() protection {
	roots := s.writable()
	var cands []string
	for _, home := range s.homes() {
		for _, e := range DefaultProtect {
			cands = append(cands, filepath.Join(home, e))
		}
	}
	for _, p := range s.Protect {
		cands = append(cands, filepath.Clean(p))
	}
	var pr protection
	gitDirs, gitFiles := findGitDirs(s.searched())
	cands = append(cands, gitFiles...)
	for _, g := range gitDirs {
		if !slices.Contains(roots, g) {
			pr.pins = append(pr.pins, g)
		}
		for _, e := range gitProtect {
			cands = append(cands, filepath.Join(g, e))
		}
		if exists(filepath.Join(g, "config")) {
			for _, e := range gitMake {
				if !exists(filepath.Join(g, e)) {
					pr.make = append(pr.make, filepath.Join(g, e))
				}
			}
		}
	}
	for _, p := range cands {
		root := rootOf(p, roots)
		if root == "" || slices.Contains(s.Write, p) {
			continue // read-only already, or given to the agent by name
		}
		if _, err := os.Lstat(p); err == nil || slices.Contains(pr.make, p) {
			pr.readOnly = append(pr.readOnly, p)
		} else if a := existingAncestor(p, root); a != "" && !isGitEntry(p) && !s.inStateDir(a) {
			pr.splits = append(pr.splits, a)
		}
	}
	slices.Sort(pr.pins) // a pin binds a directory onto itself: shallow ones first
	return pr
}

// writable are the paths the agent may write, clean: cwd, the private
// temp dir, Write, and the state dirs that exist.
func (s Spec) writable() []string {
	w := []string{filepath.Clean(s.Cwd), filepath.Clean(s.TmpDir)}
	for _, p := range s.Write {
		w = append(w, filepath.Clean(p))
	}
	for _, p := range s.StateDirs {
		if exists(p) {
			w = append(w, filepath.Clean(p))
		}
	}
	return w
}

// inStateDir says whether p is in one of the agent's state dirs, whose
// tops it must be free to add to (codex's databases, gemini's renamed
// projects.json): a missing protected file there is not split out but
// swept after the step by the caller (steps/confine).
func (s Spec) inStateDir(p string) bool {
	for _, d := range s.StateDirs {
		if within(p, filepath.Clean(d)) {
			return true
		}
	}
	return false
}

// searched are the writable paths searched for repositories: the cwd and
// Write. The private temp dir is new and empty, and the state dirs are
// the agent's (an npm cache holds thousands of directories).
func (s Spec) searched() []string {
	w := []string{filepath.Clean(s.Cwd)}
	for _, p := range s.Write {
		w = append(w, filepath.Clean(p))
	}
	return w
}

// rootOf is the writable path p lies strictly below, or "".
func rootOf(p string, roots []string) string {
	for _, r := range roots {
		if p != r && within(p, r) {
			return r
		}
	}
	return ""
}

// existingAncestor is the nearest directory above p, up to root, that
// exists; "" when none does.
func existingAncestor(p, root string) string {
	for a := filepath.Dir(p); within(a, root); a = filepath.Dir(a) {
		if fi, err := os.Lstat(a); err == nil {
			if fi.IsDir() {
				return a
			}
			return ""
		}
		if a == root {
			break
		}
	}
	return ""
}

// isGitEntry says whether p is one of a git dir's protected entries: a
// missing one is not a reason to freeze the git dir's top, where git
// writes its locks and HEAD.
func isGitEntry(p string) bool {
	return slices.Contains(gitProtect, filepath.Base(p))
}

// findGitDirs finds the git dirs an agent could write: each writable path
// that is one, and those found by a walk to maxGitDepth below each (a
// ".git" directory, or the one a ".git" file names, as a linked worktree
// or a submodule has), with their submodules' and linked worktrees' git
// dirs; and the ".git" files found, which say where a git dir is. Symlinks
// are not followed.
func findGitDirs(roots []string) (dirs, files []string) {
	w := gitWalk{roots: roots, seen: map[string]bool{}}
	for _, r := range roots {
		if isGitDir(r) {
			w.gitDir(r)
		}
		w.walk(r, 0)
	}
	return w.found, w.files
}

type gitWalk struct {
	roots []string
	seen  map[string]bool
	found []string
	files []string // .git files
	read  int      // directories read so far
}

// readDir lists dir at depth, within the walk's bounds; nil past them.
func (w *gitWalk) readDir(dir string, depth int) []os.DirEntry {
	if depth > maxGitDepth || w.read >= maxGitDirs {
		return nil
	}
	w.read++
	entries, _ := os.ReadDir(dir)
	return entries
}

func (w *gitWalk) walk(dir string, depth int) {
	for _, e := range w.readDir(dir, depth) {
		p := filepath.Join(dir, e.Name())
		switch {
		case e.Name() == ".git" && e.Type().IsDir():
			w.gitDir(p)
		case e.Name() == ".git" && e.Type().IsRegular():
			w.gitFile(p)
		case e.Type().IsDir() && e.Name() != "node_modules":
			w.walk(p, depth+1)
		}
	}
}

// gitFile records a ".git" file and follows it to the git dir it names,
// when that lies in a writable path.
func (w *gitWalk) gitFile(p string) {
	w.files = append(w.files, p)
	b, err := regularfile.Read(p, 4096)
	if err != nil {
		return
	}
	target, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
	if !ok {
		return
	}
	target = strings.TrimSpace(target)
	if !filepath.IsAbs(target) {
		target = filepath.Join(filepath.Dir(p), target)
	}
	if rootOf(target, w.roots) != "" || slices.Contains(w.roots, target) {
		w.gitDir(filepath.Clean(target))
	}
}

// gitDir records g and the git dirs inside it: its submodules' (modules/)
// and its linked worktrees' admin dirs (worktrees/); and, for a ".git"
// directory, the ".git" files of the submodules its .gitmodules names.
func (w *gitWalk) gitDir(g string) {
	if w.seen[g] {
		return
	}
	w.seen[g] = true
	w.found = append(w.found, g)
	for _, sub := range []string{"modules", "worktrees"} {
		w.nested(filepath.Join(g, sub), 0)
	}
	if filepath.Base(g) == ".git" {
		w.submodules(filepath.Dir(g))
	}
}

// submodules follows the ".git" file of each submodule path the work
// tree's .gitmodules names (a "path = sub/dir" line), however deep.
func (w *gitWalk) submodules(tree string) {
	// An earlier agent may have made it a FIFO or a link to /dev/zero:
	// only a regular file of bounded size is read.
	b, err := regularfile.Read(filepath.Join(tree, ".gitmodules"), 1<<20)
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok || strings.TrimSpace(k) != "path" {
			continue
		}
		p := filepath.Join(tree, filepath.Clean("/"+strings.TrimSpace(v)), ".git")
		if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() && !slices.Contains(w.files, p) {
			w.gitFile(p)
		}
	}
}

// nested finds git dirs below a git dir's modules/ or worktrees/: a
// submodule's name may hold slashes, so they are searched a few levels
// deep.
func (w *gitWalk) nested(dir string, depth int) {
	for _, e := range w.readDir(dir, depth) {
		if !e.Type().IsDir() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if isGitDir(p) {
			w.gitDir(p)
		} else {
			w.nested(p, depth+1)
		}
	}
}

// isGitDir says whether p looks like a git dir: one named .git, or one
// holding HEAD (a bare repository, a submodule's or a worktree's).
func isGitDir(p string) bool {
	if filepath.Base(p) == ".git" {
		fi, err := os.Lstat(p)
		return err == nil && fi.IsDir()
	}
	fi, err := os.Lstat(filepath.Join(p, "HEAD"))
	return err == nil && fi.Mode().IsRegular()
}
