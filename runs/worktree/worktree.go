// Package worktree gives each run of a batch its own `git worktree` of the
// workspace's repository, on its own branch (SPEC §9 "Worktrees", issue 27).
//
// It is a thin wrapper over the user's own git binary, never a
// reimplementation: the worktrees, branches and commits it makes are exactly
// what the user's git would make, with the user's git's features and bugs,
// and `git worktree list`, `git log` and `git branch -D` keep working on
// them. Every command runs as `git -C DIR ...` with explicit arguments, in
// the C locale, never prompting, and with hooks off. A command on a
// worktree reads it through a git directory of acpflow's own (ownGitDir),
// never through a file an agent could have written (SPEC §10).
//
// # Notes
//
// Adding worktrees is the one operation that contends: all worktrees of a
// repository share its administrative directory and refs. Add, Remove and
// Prune are serialised per repository within the process (a mutex) and
// across acpflow processes (an flock on a file in the repository's common
// git directory, which the kernel releases when a process dies), and
// retried with backoff when git reports one of its own *.lock files held by
// someone else (the user's own git, say), up to LockWait.
package worktree

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrNoGit reports that git is not installed (not found in PATH).
var ErrNoGit = errors.New("git not found in PATH: isolation: worktree runs the git you have installed; install git (e.g. `apt-get install git`, `brew install git`, or https://git-scm.com/downloads) or remove isolation: worktree")

// BranchPrefix is the namespace of the branches acpflow makes; List shows
// only worktrees on branches under it.
const BranchPrefix = "acpflow/"

// LockWait bounds how long Add, Remove, Prune and Commit retry while git
// reports its lock held by another process.
var LockWait = 60 * time.Second

// onLockRetry, when set (by tests), is called before each retry.
var onLockRetry func(lockPath string)

// Author is the author and committer of the commits acpflow makes.
const (
	AuthorName  = "acpflow"
	AuthorEmail = "acpflow@localhost"
)

// Repo is the git repository that holds a run's workspace.
type Repo struct {
	Root string // top level of the workspace's repository

	// commonDir is the repository's common git directory (shared by all its
	// worktrees); set by Open, found on first use otherwise.
	commonDir string
}

// Worktree is one run's worktree: where it is, its branch, and the base it
// started from (the ref as given, and the commit it resolved to).
type Worktree struct {
	Path, Branch, Base, BaseCommit string
}

// Listed is a worktree as List finds it in the repository.
type Listed struct {
	Worktree
	Exists bool   // the worktree's directory is still there
	Locked bool   // git holds it locked (a crash mid-add leaves it so)
	HEAD   string // the commit checked out in it
}

// Open finds the repository that holds workspace; errors name the workspace
// when it is not in a git repository.
func Open(ctx context.Context, workspace string) (*Repo, error) {
	if _, err := gitBinary(); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(workspace)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", workspace, err)
	}
	if fi, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("workspace %s: %w", abs, errors.Unwrap(err))
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("workspace %s is not a directory", abs)
	}
	out, err := run(ctx, abs, nil, "rev-parse", "--show-toplevel", "--git-common-dir")
	if err != nil {
		msg := stderrOf(err)
		if strings.Contains(msg, "not a git repository") {
			return nil, fmt.Errorf("workspace %s is not in a git repository: isolation: worktree needs one (run `git init` and commit there, or choose a workspace inside a repository)", abs)
		}
		if strings.Contains(msg, "this operation must be run in a work tree") {
			return nil, fmt.Errorf("workspace %s is inside a bare git repository or its .git directory: isolation: worktree needs a checkout", abs)
		}
		return nil, fmt.Errorf("workspace %s: %w", abs, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		return nil, fmt.Errorf("workspace %s: unexpected output from git rev-parse: %q", abs, out)
	}
	common := lines[1]
	if !filepath.IsAbs(common) {
		common = filepath.Join(abs, common)
	}
	return &Repo{Root: lines[0], commonDir: filepath.Clean(common)}, nil
}

// isHEAD tells whether base names the workspace's checkout.
func isHEAD(base string) bool { return base == "" || base == "HEAD" }

// resolve turns a ref into the commit it names.
func (r *Repo) resolve(ctx context.Context, base string) (string, error) {
	if isHEAD(base) {
		base = "HEAD"
	}
	if strings.HasPrefix(base, "-") {
		return "", fmt.Errorf("base %q is not a commit in %s", base, r.Root)
	}
	out, err := run(ctx, r.Root, nil, "rev-parse", "--verify", "--quiet", "--end-of-options", base+"^{commit}")
	if err != nil {
		if errors.Is(err, ErrNoGit) || ctx.Err() != nil {
			return "", err
		}
		if base == "HEAD" {
			return "", fmt.Errorf("repository %s has no commits yet: a worktree starts from a commit (commit something first, or set base:)", r.Root)
		}
		return "", fmt.Errorf("base %q is not a commit in %s (check base: for a typo, or `git fetch` the branch)", base, r.Root)
	}
	return strings.TrimSpace(string(out)), nil
}

// Preflight resolves base (a ref; "" means HEAD) to a commit and checks what
// must hold before any agent starts: the base exists; when base is HEAD, the
// workspace's checkout is clean (the worktree starts from the last commit,
// so it would not see uncommitted changes); and branch does not exist yet.
// It returns the resolved commit.
func (r *Repo) Preflight(ctx context.Context, base, branch string) (commit string, err error) {
	commit, err = r.resolve(ctx, base)
	if err != nil {
		return "", err
	}
	if isHEAD(base) {
		dirty, err := r.dirty(ctx)
		if err != nil {
			return "", err
		}
		if len(dirty) > 0 {
			shown := dirty
			more := ""
			if len(shown) > 10 {
				more = fmt.Sprintf(" and %d more", len(shown)-10)
				shown = shown[:10]
			}
			return "", fmt.Errorf("the checkout of %s has uncommitted changes (%s%s): a worktree starts from the last commit (HEAD %.12s) and would not see them; commit or stash them, or set base: to a ref to start from explicitly",
				r.Root, strings.Join(shown, ", "), more, commit)
		}
	}
	if err := r.checkNewBranch(ctx, branch); err != nil {
		return "", err
	}
	return commit, nil
}

// checkNewBranch checks that branch is a valid name that does not exist yet.
func (r *Repo) checkNewBranch(ctx context.Context, branch string) error {
	if branch == "" || strings.HasPrefix(branch, "-") {
		return fmt.Errorf("branch name %q is not valid", branch)
	}
	if _, err := run(ctx, r.Root, nil, "check-ref-format", "refs/heads/"+branch); err != nil {
		if errors.Is(err, ErrNoGit) || ctx.Err() != nil {
			return err
		}
		return fmt.Errorf("branch name %q is not valid in git", branch)
	}
	if r.branchExists(ctx, branch) {
		return fmt.Errorf("branch %s already exists in %s: acpflow makes a new branch per run; delete it (`git branch -D %s`) or prune old worktrees (`acpflow worktrees --prune`)", branch, r.Root, branch)
	}
	return nil
}

func (r *Repo) branchExists(ctx context.Context, branch string) bool {
	_, err := run(ctx, r.Root, nil, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch)
	return err == nil
}

// dirty lists what `git status` shows in the workspace's checkout, except
// untracked directories that only hold registered worktrees (worktrees
// placed inside the workspace must not make the next batch's base dirty).
func (r *Repo) dirty(ctx context.Context) ([]string, error) {
	out, err := run(ctx, r.Root, nil, "status", "--porcelain=v1", "-z", "--untracked-files=normal", "--ignore-submodules=dirty")
	if err != nil {
		return nil, err
	}
	var wtPaths []string
	if ls, err := r.worktrees(ctx); err == nil {
		for _, l := range ls {
			wtPaths = append(wtPaths, l.path)
		}
	}
	var files []string
	for _, e := range statusEntries(out) {
		if e.xy == "??" && holdsOnlyWorktrees(filepath.Join(r.Root, e.name), wtPaths) {
			continue
		}
		files = append(files, e.name)
	}
	return files, nil
}

func holdsOnlyWorktrees(p string, wtPaths []string) bool {
	p = filepath.Clean(p)
	for _, w := range wtPaths {
		if w == p || strings.HasPrefix(w, p+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// repoLocks serialises Add, Remove and Prune per repository within the
// process; lockRepo adds the cross-process flock.
var repoLocks sync.Map // common git dir → chan struct{} (a semaphore of 1 that a ctx can stop waiting on)

func (r *Repo) gitCommonDir(ctx context.Context) (string, error) {
	if r.commonDir != "" {
		return r.commonDir, nil
	}
	out, err := run(ctx, r.Root, nil, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return "", err
	}
	return filepath.Clean(strings.TrimSpace(string(out))), nil
}

func (r *Repo) lockRepo(ctx context.Context) (unlock func(), err error) {
	dir, err := r.gitCommonDir(ctx)
	if err != nil {
		return nil, err
	}
	s, _ := repoLocks.LoadOrStore(dir, make(chan struct{}, 1))
	sem := s.(chan struct{})
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting to change the worktrees of %s: %w", r.Root, ctx.Err())
	}
	unlockFile, err := lockFile(ctx, filepath.Join(dir, "acpflow-worktrees.flock"))
	if err != nil {
		<-sem
		return nil, fmt.Errorf("waiting to change the worktrees of %s: %w", r.Root, err)
	}
	return func() { unlockFile(); <-sem }, nil
}

// lockHeld matches git's message for a *.lock file that exists, and
// captures its path: "Unable to create '/r/.git/index.lock': File exists."
var lockHeld = regexp.MustCompile(`Unable to create '([^']+\.lock)': File exists`)

// runRetrying runs a git command that may trip on a lock held by another
// process, retrying with jittered exponential backoff up to LockWait.
func runRetrying(ctx context.Context, dir string, env []string, args ...string) ([]byte, error) {
	deadline := time.Now().Add(LockWait)
	delay := 10 * time.Millisecond
	for {
		out, err := run(ctx, dir, env, args...)
		if err == nil {
			return out, nil
		}
		m := lockHeld.FindStringSubmatch(stderrOf(err))
		if m == nil {
			return out, err
		}
		if time.Now().After(deadline) {
			return out, fmt.Errorf("git %s (in %s): git's lock %s stayed held by another process for %s; if no git process is running in this repository, a crashed one left it: remove that file and retry",
				strings.Join(args, " "), dir, m[1], LockWait)
		}
		if onLockRetry != nil {
			onLockRetry(m[1])
		}
		sleep := delay/2 + rand.N(delay/2+1)
		select {
		case <-ctx.Done():
			return out, fmt.Errorf("git %s (in %s): waiting for git's lock %s: %w", strings.Join(args, " "), dir, m[1], ctx.Err())
		case <-time.After(sleep):
		}
		if delay < time.Second {
			delay *= 2
		}
	}
}

// Add runs `git worktree add -b branch path commit`, where commit is what
// base (a ref; "" means HEAD) resolves to. Path is made absolute.
//
// # Notes
//
// Safe to call from many goroutines and many processes at once on one
// repository; see the package notes. When a lock error strikes after git
// made the branch but before it checked it out, the retry checks out that
// branch rather than failing on "already exists".
func (r *Repo) Add(ctx context.Context, path, branch, base string) (Worktree, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return Worktree{}, fmt.Errorf("worktree path %s: %w", path, err)
	}
	if isHEAD(base) {
		base = "HEAD"
	}
	commit, err := r.resolve(ctx, base)
	if err != nil {
		return Worktree{}, err
	}
	if err := r.checkNewBranch(ctx, branch); err != nil {
		return Worktree{}, err
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return Worktree{}, fmt.Errorf("worktree path %s: %w", abs, err)
	}
	unlock, err := r.lockRepo(ctx)
	if err != nil {
		return Worktree{}, err
	}
	defer unlock()
	wt := Worktree{Path: abs, Branch: branch, Base: base, BaseCommit: commit}
	_, err = runRetrying(ctx, r.Root, nil, "worktree", "add", "--quiet", "-b", branch, "--end-of-options", abs, commit)
	if err == nil {
		return wt, nil
	}
	// git made the branch, then tripped on a lock: check it out instead.
	if ctx.Err() == nil && strings.Contains(stderrOf(err), "already exists") && r.branchAt(ctx, branch, commit) {
		if _, err2 := runRetrying(ctx, r.Root, nil, "worktree", "add", "--quiet", "--end-of-options", abs, branch); err2 == nil {
			return wt, nil
		}
	}
	// git makes the branch before it checks the path or checks out, and
	// leaves it behind when those fail (or when cancelled: on SIGTERM git
	// removes its half-made worktree, not the branch). checkNewBranch
	// showed the branch is ours, so a retry of this Add can succeed.
	cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if r.branchAt(cleanup, branch, commit) {
		run(cleanup, r.Root, nil, "branch", "--quiet", "-D", "--end-of-options", branch)
	}
	if ctx.Err() != nil {
		return Worktree{}, fmt.Errorf("adding worktree %s on branch %s: %w", abs, branch, ctx.Err())
	}
	return Worktree{}, fmt.Errorf("adding worktree %s on branch %s: %w", abs, branch, err)
}

// branchAt tells whether branch exists, points at commit and is checked
// out nowhere: the trace of an add that made the branch and then failed.
func (r *Repo) branchAt(ctx context.Context, branch, commit string) bool {
	out, err := run(ctx, r.Root, nil, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch)
	if err != nil || strings.TrimSpace(string(out)) != commit {
		return false
	}
	ls, err := r.worktrees(ctx)
	if err != nil {
		return false
	}
	for _, l := range ls {
		if l.branch == branch {
			return false
		}
	}
	return true
}

// Commit stages everything in the worktree (new, changed and deleted files,
// respecting .gitignore) and commits it on the worktree's branch with
// author and committer "acpflow <acpflow@localhost>" and message. It
// returns the new commit and the files that commit changed; when nothing
// changed it commits nothing and returns "" and nil files.
//
// # Notes
//
// git reads the worktree through acpflow's own git directory (ownGitDir),
// and the commit is made with git's plumbing (write-tree, commit-tree,
// update-ref --no-deref on refs/heads/BRANCH from the commit it named
// before), not `git commit`: no hook, editor, signing or trailer command
// can run, and the commit lands on the branch itself, never on a ref the
// branch was made a symbolic link to. The branch is read back afterwards:
// a commit that is not what the branch names is an error, never a result.
func (r *Repo) Commit(ctx context.Context, wt Worktree, message string) (commit string, files []string, err error) {
	fail := func(err error) (string, []string, error) {
		return "", nil, fmt.Errorf("committing in worktree %s: %w", wt.Path, err)
	}
	if _, err := os.Stat(wt.Path); err != nil {
		return fail(err)
	}
	if strings.TrimSpace(message) == "" {
		message = "acpflow: changes on " + wt.Branch
	}
	g, err := r.openGitDir(ctx, wt)
	if err != nil {
		return fail(err)
	}
	defer g.close()
	// An agent may switch branches in its worktree; its work then is not
	// where the run's result says, so acpflow does not commit it anywhere.
	if g.head != wt.Branch {
		return fail(fmt.Errorf("it is on %s, not on its branch %s (did the agent switch branches?); nothing committed", headText(g.head), wt.Branch))
	}
	parent, err := r.BranchCommit(ctx, wt.Branch)
	if err != nil {
		return fail(fmt.Errorf("%w; nothing committed", err))
	}
	if _, err := g.gitRetrying(ctx, nil, "add", "--all"); err != nil {
		return fail(err)
	}
	out, err := g.git(ctx, nil, "diff", "--cached", "--name-only", "-z", "--no-renames", "--no-ext-diff", "--no-textconv", parent, "--")
	if err != nil {
		return fail(err)
	}
	if files = splitZ(out); len(files) == 0 {
		return "", nil, nil
	}
	if commit, err = g.commitIndex(ctx, parent, message); err != nil {
		return fail(err)
	}
	if _, err := g.gitRetrying(ctx, nil, "update-ref", "--no-deref", "-m", "acpflow: commit", "refs/heads/"+wt.Branch, commit, parent); err != nil {
		return fail(err)
	}
	if err := r.verifyOnBranch(ctx, wt.Branch, commit); err != nil {
		return fail(err)
	}
	return commit, files, nil
}

// commitIndex writes the index as a commit on parent, authored by acpflow.
func (g *ownGitDir) commitIndex(ctx context.Context, parent, message string) (string, error) {
	tree, err := g.git(ctx, nil, "write-tree")
	if err != nil {
		return "", err
	}
	who := []string{
		"GIT_AUTHOR_NAME=" + AuthorName, "GIT_AUTHOR_EMAIL=" + AuthorEmail,
		"GIT_COMMITTER_NAME=" + AuthorName, "GIT_COMMITTER_EMAIL=" + AuthorEmail,
	}
	out, err := g.git(ctx, who, "commit-tree", "-p", parent, "-m", message, strings.TrimSpace(string(tree)))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// BranchCommit is the commit refs/heads/branch names in the repository's
// common git directory (the one Open found). A branch that is gone, or
// that is a symbolic ref (a commit through it would land on the branch it
// points at), is an error that says so.
func (r *Repo) BranchCommit(ctx context.Context, branch string) (string, error) {
	common, err := r.gitCommonDir(ctx)
	if err != nil {
		return "", err
	}
	env := []string{"GIT_DIR=" + common}
	ref := "refs/heads/" + branch
	if out, err := run(ctx, common, env, "symbolic-ref", "--quiet", ref); err == nil {
		return "", fmt.Errorf("branch %s is a symbolic ref to %s, not the branch acpflow made", branch, strings.TrimSpace(string(out)))
	} else if ctx.Err() != nil || errors.Is(err, ErrNoGit) {
		return "", err
	}
	out, err := run(ctx, common, env, "rev-parse", "--verify", "--quiet", "--end-of-options", ref+"^{commit}")
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, ErrNoGit) {
			return "", err
		}
		return "", fmt.Errorf("branch %s is not in %s (deleted?)", branch, r.Root)
	}
	return strings.TrimSpace(string(out)), nil
}

// verifyOnBranch checks that branch names commit, read back by acpflow's
// git from the repository: what a result reports as a worktree's commit.
func (r *Repo) verifyOnBranch(ctx context.Context, branch, commit string) error {
	got, err := r.BranchCommit(ctx, branch)
	if err != nil {
		return fmt.Errorf("the commit %.12s acpflow made is not on branch %s: %w", commit, branch, err)
	}
	if got != commit {
		return fmt.Errorf("the commit %.12s acpflow made is not on branch %s, which names %.12s", commit, branch, got)
	}
	return nil
}

// Changed lists the files changed on the worktree's branch against
// BaseCommit, plus uncommitted ones (new files not ignored included), for
// listing. When the worktree's directory is gone it lists the branch's
// committed changes only.
func (r *Repo) Changed(ctx context.Context, wt Worktree) ([]string, error) {
	if wt.BaseCommit == "" {
		return nil, fmt.Errorf("worktree %s: no base commit recorded, cannot tell what changed", wt.Path)
	}
	seen := map[string]bool{}
	if _, err := os.Stat(wt.Path); err != nil {
		out, err := run(ctx, r.Root, nil, "diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", "--no-textconv", wt.BaseCommit, "refs/heads/"+wt.Branch, "--")
		if err != nil {
			return nil, fmt.Errorf("changes on branch %s: %w", wt.Branch, err)
		}
		for _, f := range splitZ(out) {
			seen[f] = true
		}
	} else {
		changed, err := r.worktreeChanges(ctx, wt)
		if err != nil {
			return nil, fmt.Errorf("changes in worktree %s: %w", wt.Path, err)
		}
		for _, f := range changed {
			seen[f] = true
		}
	}
	files := make([]string, 0, len(seen))
	for f := range seen {
		files = append(files, f)
	}
	sort.Strings(files)
	return files, nil
}

// worktreeChanges lists the files of the worktree wt that differ from
// its BaseCommit, and its untracked files not ignored. A submodule's
// checkout is compared by its commit alone: looking into it would run a
// git in it that reads the submodule's own .git, which the agent wrote.
func (r *Repo) worktreeChanges(ctx context.Context, wt Worktree) ([]string, error) {
	g, err := r.openGitDir(ctx, wt)
	if err != nil {
		return nil, err
	}
	defer g.close()
	out, err := g.git(ctx, nil, "diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", "--no-textconv", "--ignore-submodules=dirty", wt.BaseCommit, "--")
	if err != nil {
		return nil, err
	}
	files := splitZ(out)
	out, err = g.git(ctx, nil, "ls-files", "-z", "--others", "--exclude-standard")
	if err != nil {
		return nil, err
	}
	return append(files, splitZ(out)...), nil
}

// headText names what head (as head returns it) has checked out.
func headText(head string) string {
	if head == "" {
		return "a detached HEAD"
	}
	return head
}

// Status is what a worktree holds that its branch does not.
type Status struct {
	// Head is the branch checked out in it, "" when HEAD is detached.
	Head string
	// Uncommitted lists the files changed and not committed: tracked
	// files modified, added or deleted (staged or not), and untracked
	// files that .gitignore does not ignore. Ignored files are not
	// changes: acpflow's commit leaves them out too.
	Uncommitted []string
}

// Status says what the worktree wt holds that is not committed on its
// branch, reading it through acpflow's own git directory (ownGitDir).
// Changes inside a submodule's own checkout are not looked into; a
// submodule moved to another commit is a change.
func (r *Repo) Status(ctx context.Context, wt Worktree) (Status, error) {
	g, err := r.openGitDir(ctx, wt)
	if err != nil {
		return Status{}, fmt.Errorf("status of worktree %s: %w", wt.Path, err)
	}
	defer g.close()
	out, err := g.git(ctx, nil, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignore-submodules=dirty")
	if err != nil {
		return Status{}, fmt.Errorf("status of worktree %s: %w", wt.Path, err)
	}
	var files []string
	for _, e := range statusEntries(out) {
		files = append(files, e.name)
	}
	return Status{Head: g.head, Uncommitted: files}, nil
}

// statusEntry is one file of `git status --porcelain=v1 -z`.
type statusEntry struct{ xy, name string }

func statusEntries(out []byte) []statusEntry {
	fields := splitZ(out)
	var list []statusEntry
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if len(f) < 4 {
			continue
		}
		e := statusEntry{xy: f[:2], name: f[3:]}
		if e.xy[0] == 'R' || e.xy[0] == 'C' {
			i++ // the original name follows
		}
		list = append(list, e)
	}
	return list
}

// Ahead counts the commits on branch that base does not have: 0 means
// deleting the branch loses nothing. A branch that is gone has none.
func (r *Repo) Ahead(ctx context.Context, branch, base string) (int, error) {
	if !r.branchExists(ctx, branch) {
		return 0, nil
	}
	out, err := run(ctx, r.Root, nil, "rev-list", "--count", "--end-of-options", "refs/heads/"+branch, "^"+base)
	if err != nil {
		return 0, fmt.Errorf("commits on branch %s: %w", branch, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		return 0, fmt.Errorf("commits on branch %s: git rev-list said %q", branch, out)
	}
	return n, nil
}

// Remove removes the worktree, forcibly (it may hold uncommitted junk, or
// be locked by a crash mid-add), and, when deleteBranch, its branch.
// Removing a worktree or branch that is already gone is not an error.
func (r *Repo) Remove(ctx context.Context, wt Worktree, deleteBranch bool) error {
	if wt.Path != "" {
		abs, err := filepath.Abs(wt.Path)
		if err != nil {
			return fmt.Errorf("removing worktree %s: %w", wt.Path, err)
		}
		wt.Path = abs
	}
	unlock, err := r.lockRepo(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if wt.Path != "" {
		if err := r.removeWorktree(ctx, wt.Path); err != nil {
			return err
		}
	}
	if deleteBranch && wt.Branch != "" {
		if _, err := runRetrying(ctx, r.Root, nil, "branch", "--quiet", "-D", "--end-of-options", wt.Branch); err != nil {
			if !strings.Contains(stderrOf(err), "not found") {
				return fmt.Errorf("deleting branch %s: %w", wt.Branch, err)
			}
		}
	}
	return nil
}

// removeWorktree runs `git worktree remove` on path, forcibly. When git
// refuses because the .git file inside is not the one it wrote (an agent
// changed or removed it), acpflow removes the directory it made itself,
// without following a link, and has git forget it (git worktree prune).
func (r *Repo) removeWorktree(ctx context.Context, path string) error {
	_, err := runRetrying(ctx, r.Root, nil, "worktree", "remove", "--force", "--force", "--end-of-options", path)
	switch msg := stderrOf(err); {
	case err == nil, strings.Contains(msg, "is not a working tree"):
		return nil
	case !strings.Contains(msg, "validation failed"):
		return fmt.Errorf("removing worktree %s: %w", path, err)
	}
	if err := os.RemoveAll(path); err != nil {
		return fmt.Errorf("removing worktree %s: %w", path, err)
	}
	if _, err := runRetrying(ctx, r.Root, nil, "worktree", "prune"); err != nil {
		return fmt.Errorf("removing worktree %s: %w", path, err)
	}
	return nil
}

// entry is one record of `git worktree list --porcelain`.
type entry struct {
	path, head, branch   string
	locked, initializing bool
}

func (r *Repo) worktrees(ctx context.Context) ([]entry, error) {
	out, err := run(ctx, r.Root, nil, "worktree", "list", "--porcelain", "-z")
	if err != nil {
		return nil, err
	}
	var list []entry
	var cur *entry
	for _, f := range strings.Split(string(out), "\x00") {
		key, val, _ := strings.Cut(f, " ")
		switch key {
		case "worktree":
			list = append(list, entry{path: filepath.Clean(val)})
			cur = &list[len(list)-1]
		case "HEAD":
			if cur != nil {
				cur.head = val
			}
		case "branch":
			if cur != nil {
				cur.branch = strings.TrimPrefix(val, "refs/heads/")
			}
		case "locked":
			if cur != nil {
				cur.locked = true
				cur.initializing = val == "initializing"
			}
		}
	}
	return list, nil
}

// List returns the repository's worktrees on branches under "acpflow/",
// with their paths, whether the path still exists, and lock state, from
// one `git worktree list`. git records no base, so Base and BaseCommit are
// empty: the run's own record has them.
func (r *Repo) List(ctx context.Context) ([]Listed, error) {
	ls, err := r.worktrees(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing worktrees of %s: %w", r.Root, err)
	}
	var out []Listed
	for _, e := range ls {
		if !strings.HasPrefix(e.branch, BranchPrefix) {
			continue
		}
		_, statErr := os.Stat(e.path)
		l := Listed{
			Worktree: Worktree{Path: e.path, Branch: e.branch},
			Exists:   statErr == nil,
			Locked:   e.locked,
			HEAD:     e.head,
		}
		out = append(out, l)
	}
	return out, nil
}

// Prune runs `git worktree prune` after clearing what a crash mid-add
// leaves: git locks a worktree "initializing" while it adds it, so a killed
// add leaves a locked worktree, often with a partial checkout or none, that
// `git worktree prune` skips. Prune holds the same lock as Add, so any
// worktree still "initializing" then is stale; it is removed. Left-over
// *.lock files in the administrative directories of worktrees whose
// directory is gone are removed too. Afterwards no worktree is left that
// git cannot remove.
func (r *Repo) Prune(ctx context.Context) error {
	unlock, err := r.lockRepo(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	common, err := r.gitCommonDir(ctx)
	if err != nil {
		return err
	}
	ls, err := r.worktrees(ctx)
	if err != nil {
		return fmt.Errorf("pruning worktrees of %s: %w", r.Root, err)
	}
	for i, e := range ls {
		if i == 0 { // the main worktree
			continue
		}
		_, statErr := os.Stat(e.path)
		gone := statErr != nil
		// A crash in the moment between git making the administrative
		// directory and pointing its HEAD at the branch leaves no branch and
		// a null HEAD; any other worktree off acpflow/ branches is the user's.
		ours := strings.HasPrefix(e.branch, BranchPrefix) ||
			e.initializing && e.branch == "" && strings.Trim(e.head, "0") == ""
		if !ours {
			continue
		}
		if gone {
			removeStaleLocks(common, e.path)
		}
		if e.initializing {
			if _, err := runRetrying(ctx, r.Root, nil, "worktree", "remove", "--force", "--force", "--end-of-options", e.path); err != nil && !strings.Contains(stderrOf(err), "is not a working tree") {
				return fmt.Errorf("removing the worktree %s a crash left half-added: %w", e.path, err)
			}
		} else if gone && e.locked {
			// Locked by acpflow's own git, never by the user on an acpflow/ branch.
			if _, err := run(ctx, r.Root, nil, "worktree", "unlock", "--end-of-options", e.path); err != nil {
				return fmt.Errorf("unlocking worktree %s: %w", e.path, err)
			}
		}
	}
	if _, err := runRetrying(ctx, r.Root, nil, "worktree", "prune"); err != nil {
		return fmt.Errorf("pruning worktrees of %s: %w", r.Root, err)
	}
	return nil
}

// removeStaleLocks removes *.lock files from the administrative directory
// of the worktree at path (whose directory is gone, so no git can be using
// them).
func removeStaleLocks(common, path string) {
	admin := adminDir(common, path)
	if admin == "" {
		return
	}
	locks, _ := filepath.Glob(filepath.Join(admin, "*.lock"))
	for _, l := range locks {
		os.Remove(l)
	}
}

// adminDir is the administrative directory git keeps for the worktree at
// path in the repository's common git directory: the one whose gitdir file
// points at path/.git (git writes it with symlinks resolved). "" when git
// keeps none for path. git names it after path's last element (with a
// number added when that is taken), so that one is tried first: a batch
// of thousands of worktrees does not read every gitdir file per command.
func adminDir(common, path string) string {
	want := map[string]bool{filepath.Join(path, ".git"): true}
	if parent, err := filepath.EvalSymlinks(filepath.Dir(path)); err == nil {
		want[filepath.Join(parent, filepath.Base(path), ".git")] = true
	}
	pointsBack := func(gitdir string) bool {
		b, err := os.ReadFile(gitdir)
		return err == nil && want[filepath.Clean(strings.TrimSpace(string(b)))]
	}
	if g := filepath.Join(common, "worktrees", filepath.Base(path), "gitdir"); pointsBack(g) {
		return filepath.Dir(g)
	}
	admins, _ := filepath.Glob(filepath.Join(common, "worktrees", "*", "gitdir"))
	for _, g := range admins {
		if pointsBack(g) {
			return filepath.Dir(g)
		}
	}
	return ""
}
