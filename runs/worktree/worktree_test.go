package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// pause waits a little between looks at an event this test
// cannot be told about (a file another process writes).
func pause() { time.Sleep(5 * time.Millisecond) }

// TestMain keeps the user's git configuration out of the tests, and turns
// the test binary into the helper process of TestAddFromManyProcesses when
// asked to.
func TestMain(m *testing.M) {
	os.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	if spec := os.Getenv("WORKTREE_TEST_ADD"); spec != "" {
		os.Exit(helperAdd(spec))
	}
	os.Exit(m.Run())
}

// helperAdd adds n worktrees from goroutines: spec is "ROOT|PREFIX|N".
func helperAdd(spec string) int {
	parts := strings.Split(spec, "|")
	n, _ := strconv.Atoi(parts[2])
	ctx := context.Background()
	r, err := Open(ctx, parts[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			name := fmt.Sprintf("%s-%d", parts[1], i)
			_, err := r.Add(ctx, filepath.Join(filepath.Dir(r.Root), "wt", name), BranchPrefix+name, "")
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	code := 0
	for err := range errs {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	return code
}

// git runs a setup command in dir and returns its trimmed output.
func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// newRepo makes a repository with a few committed files, in its own
// directory "repo" under a temporary directory (worktrees go beside it).
func newRepo(t testing.TB) *Repo {
	t.Helper()
	root := filepath.Join(t.TempDir(), "repo")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, root, "init", "-q", "-b", "main")
	write(t, filepath.Join(root, "README"), "hello\n")
	write(t, filepath.Join(root, "src/a.go"), "package a\n")
	write(t, filepath.Join(root, "src/old.txt"), "old\n")
	write(t, filepath.Join(root, ".gitignore"), "*.log\n")
	git(t, root, "add", "-A")
	git(t, root, "commit", "-q", "-m", "init")
	r, err := Open(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func wtPath(r *Repo, name string) string { return filepath.Join(filepath.Dir(r.Root), "wt", name) }

func mustContain(t *testing.T, err error, wants ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", wants)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
}

func TestErrorsBeforeAnyAgentStarts(t *testing.T) {
	ctx := context.Background()
	t.Run("git missing from PATH is ErrNoGit and says how to install it", func(t *testing.T) {
		r := newRepo(t)
		t.Setenv("PATH", t.TempDir())
		_, err := Open(ctx, r.Root)
		if !errors.Is(err, ErrNoGit) {
			t.Fatalf("Open without git: %v, want ErrNoGit", err)
		}
		mustContain(t, err, "git not found", "install git")
		if _, err := r.Preflight(ctx, "", "acpflow/x"); !errors.Is(err, ErrNoGit) {
			t.Fatalf("Preflight without git: %v, want ErrNoGit", err)
		}
		if _, err := r.Add(ctx, wtPath(r, "x"), "acpflow/x", ""); !errors.Is(err, ErrNoGit) {
			t.Fatalf("Add without git: %v, want ErrNoGit", err)
		}
	})
	t.Run("a workspace outside any repository is named", func(t *testing.T) {
		dir := t.TempDir()
		t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(dir))
		_, err := Open(ctx, dir)
		mustContain(t, err, dir, "not in a git repository")
	})
	t.Run("a missing workspace is named", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "nope")
		_, err := Open(ctx, dir)
		mustContain(t, err, dir)
	})
	t.Run("a subdirectory opens its repository", func(t *testing.T) {
		r := newRepo(t)
		sub, err := Open(ctx, filepath.Join(r.Root, "src"))
		if err != nil || sub.Root != r.Root {
			t.Fatalf("Open(src) = %+v, %v; want root %s", sub, err, r.Root)
		}
	})
	t.Run("a clean HEAD resolves to its commit", func(t *testing.T) {
		r := newRepo(t)
		c, err := r.Preflight(ctx, "", "acpflow/x")
		if err != nil || c != git(t, r.Root, "rev-parse", "HEAD") {
			t.Fatalf("Preflight = %q, %v", c, err)
		}
	})
	t.Run("a dirty base names the changed files and what to do", func(t *testing.T) {
		r := newRepo(t)
		write(t, filepath.Join(r.Root, "README"), "changed\n")
		write(t, filepath.Join(r.Root, "new.txt"), "new\n")
		write(t, filepath.Join(r.Root, "debug.log"), "ignored\n")
		_, err := r.Preflight(ctx, "HEAD", "acpflow/x")
		mustContain(t, err, r.Root, "README", "new.txt", "would not see them", "commit or stash")
		if strings.Contains(err.Error(), "debug.log") {
			t.Errorf("an ignored file counts as a change: %v", err)
		}
		if _, err := r.Preflight(ctx, "main", "acpflow/x"); err != nil {
			t.Errorf("an explicit base with a dirty checkout: %v", err)
		}
	})
	t.Run("worktrees placed inside the workspace do not make it dirty", func(t *testing.T) {
		r := newRepo(t)
		if _, err := r.Add(ctx, filepath.Join(r.Root, ".worktrees", "one"), "acpflow/one", ""); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Preflight(ctx, "", "acpflow/two"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a branch that exists is named", func(t *testing.T) {
		r := newRepo(t)
		git(t, r.Root, "branch", "acpflow/taken")
		_, err := r.Preflight(ctx, "", "acpflow/taken")
		mustContain(t, err, "branch acpflow/taken already exists", "git branch -D acpflow/taken")
		_, err = r.Add(ctx, wtPath(r, "taken"), "acpflow/taken", "")
		mustContain(t, err, "acpflow/taken already exists")
	})
	t.Run("an invalid branch name is named", func(t *testing.T) {
		r := newRepo(t)
		_, err := r.Preflight(ctx, "", "acpflow/a..b")
		mustContain(t, err, `"acpflow/a..b" is not valid`)
	})
	t.Run("a bad base is named", func(t *testing.T) {
		r := newRepo(t)
		for _, base := range []string{"no-such-branch", "--all", "0123456789abcdef"} {
			_, err := r.Preflight(ctx, base, "acpflow/x")
			mustContain(t, err, fmt.Sprintf("base %q is not a commit", base))
		}
	})
	t.Run("a repository without commits says so", func(t *testing.T) {
		root := t.TempDir()
		git(t, root, "init", "-q")
		r, err := Open(ctx, root)
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.Preflight(ctx, "", "acpflow/x")
		mustContain(t, err, "no commits yet")
	})
}

func TestAddMakesABranchAtTheBase(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	first := git(t, r.Root, "rev-parse", "HEAD")
	write(t, filepath.Join(r.Root, "second"), "2\n")
	git(t, r.Root, "add", "-A")
	git(t, r.Root, "commit", "-q", "-m", "second")
	wt, err := r.Add(ctx, wtPath(r, "one"), "acpflow/one", "HEAD~1")
	if err != nil {
		t.Fatal(err)
	}
	if wt.Base != "HEAD~1" || wt.BaseCommit != first || wt.Branch != "acpflow/one" || !filepath.IsAbs(wt.Path) {
		t.Fatalf("Add = %+v, want base HEAD~1 at %s", wt, first)
	}
	if got := git(t, wt.Path, "rev-parse", "--abbrev-ref", "HEAD"); got != "acpflow/one" {
		t.Errorf("worktree on %q", got)
	}
	if _, err := os.Stat(filepath.Join(wt.Path, "second")); !os.IsNotExist(err) {
		t.Errorf("worktree of HEAD~1 has the later file: %v", err)
	}
	if s := git(t, r.Root, "status", "--porcelain"); s != "" {
		t.Errorf("the workspace's checkout changed: %s", s)
	}
}

func TestAddToAPathThatExists(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	path := wtPath(r, "taken")
	write(t, filepath.Join(path, "mine.txt"), "the user's\n")
	_, err := r.Add(ctx, path, "acpflow/taken", "")
	mustContain(t, err, path, "already exists")
	if got := git(t, r.Root, "for-each-ref", "refs/heads/acpflow/"); got != "" {
		t.Errorf("a failed Add left its branch: %s", got)
	}
	if b, err := os.ReadFile(filepath.Join(path, "mine.txt")); err != nil || string(b) != "the user's\n" {
		t.Errorf("the user's file: %q, %v", b, err)
	}
	if _, err := r.Add(ctx, wtPath(r, "free"), "acpflow/taken", ""); err != nil {
		t.Fatalf("Add of the same branch to a free path: %v", err)
	}
}

func assertWorktrees(t *testing.T, r *Repo, n int) {
	t.Helper()
	ls, err := r.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != n {
		t.Fatalf("List: %d worktrees, want %d: %+v", len(ls), n, ls)
	}
	for _, l := range ls {
		if !l.Exists || l.Locked {
			t.Errorf("worktree %+v: want existing and unlocked", l)
		}
		if _, err := os.Stat(filepath.Join(l.Path, "src", "a.go")); err != nil {
			t.Errorf("worktree %s is not checked out: %v", l.Path, err)
		}
	}
}

func TestAddFrom16GoroutinesAtOnce(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	// A second Repo value for the same repository, as another run would have.
	r2, err := Open(ctx, filepath.Join(r.Root, "src"))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 16)
	start := make(chan struct{})
	for i := range 16 {
		wg.Go(func() {
			<-start
			repo := r
			if i%2 == 1 {
				repo = r2
			}
			name := fmt.Sprintf("g%d", i)
			_, errs[i] = repo.Add(ctx, wtPath(r, name), BranchPrefix+name, "")
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Add %d: %v", i, err)
		}
	}
	assertWorktrees(t, r, 16)
}

func TestAddFromManyProcesses(t *testing.T) {
	r := newRepo(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const procs, each = 4, 4
	var cmds []*exec.Cmd
	for p := range procs {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("WORKTREE_TEST_ADD=%s|p%d|%d", r.Root, p, each))
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if out.Len() > 0 {
				t.Logf("process %d said: %s", p, out.String())
			}
		})
		cmds = append(cmds, cmd)
	}
	for p, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("process %d: %v", p, err)
		}
		if err := syscall.Kill(cmd.Process.Pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d (pid %d) still there: %v", p, cmd.Process.Pid, err)
		}
	}
	assertWorktrees(t, r, procs*each)
}

func TestAddRetriesWhileGitsLockIsHeld(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	lock := filepath.Join(r.Root, ".git", "refs", "heads", "acpflow", "held.lock")
	write(t, lock, "")
	retries := 0
	onLockRetry = func(path string) {
		retries++
		if path != lock {
			t.Errorf("retrying on %s, want %s", path, lock)
		}
		os.Remove(lock) // the other process finishes
	}
	t.Cleanup(func() { onLockRetry = nil })
	if _, err := r.Add(ctx, wtPath(r, "held"), "acpflow/held", ""); err != nil {
		t.Fatal(err)
	}
	if retries == 0 {
		t.Fatal("Add never met the lock")
	}
	assertWorktrees(t, r, 1)

	t.Run("a lock that stays gives a clear error after the bounded wait", func(t *testing.T) {
		onLockRetry = nil
		old := LockWait
		LockWait = 0
		t.Cleanup(func() { LockWait = old })
		stuck := filepath.Join(r.Root, ".git", "refs", "heads", "acpflow", "stuck.lock")
		write(t, stuck, "")
		_, err := r.Add(ctx, wtPath(r, "stuck"), "acpflow/stuck", "")
		mustContain(t, err, stuck, "stayed held by another process", "remove that file")
	})
}

func TestCommit(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	// A user hook that fails every commit must not stop acpflow's.
	write(t, filepath.Join(r.Root, ".git", "hooks", "pre-commit"), "#!/bin/sh\necho hook ran >&2\nexit 1\n")
	os.Chmod(filepath.Join(r.Root, ".git", "hooks", "pre-commit"), 0o755)
	wt, err := r.Add(ctx, wtPath(r, "c"), "acpflow/c", "")
	if err != nil {
		t.Fatal(err)
	}

	t.Run("nothing changed commits nothing", func(t *testing.T) {
		c, files, err := r.Commit(ctx, wt, "nothing")
		if c != "" || files != nil || err != nil {
			t.Fatalf("Commit = %q, %q, %v; want nothing", c, files, err)
		}
		if head := git(t, wt.Path, "rev-parse", "HEAD"); head != wt.BaseCommit {
			t.Errorf("HEAD moved to %s", head)
		}
	})
	t.Run("new, changed and deleted files are committed, ignored ones are not", func(t *testing.T) {
		write(t, filepath.Join(wt.Path, "src/a.go"), "package a // changed\n")
		write(t, filepath.Join(wt.Path, "src/new/b.go"), "package b\n")
		write(t, filepath.Join(wt.Path, "build.log"), "ignored\n")
		os.Remove(filepath.Join(wt.Path, "src/old.txt"))
		c, files, err := r.Commit(ctx, wt, "acpflow: run r1 of fix.yaml")
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"src/a.go", "src/new/b.go", "src/old.txt"}
		if !slices.Equal(files, want) {
			t.Errorf("files %q, want %q", files, want)
		}
		if got := git(t, r.Root, "rev-parse", "acpflow/c"); got != c {
			t.Errorf("branch at %s, Commit said %s", got, c)
		}
		if got := git(t, r.Root, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%s|%P", c); got != "acpflow <acpflow@localhost>|acpflow <acpflow@localhost>|acpflow: run r1 of fix.yaml|"+wt.BaseCommit {
			t.Errorf("commit: %s", got)
		}
		if s := git(t, wt.Path, "status", "--porcelain"); s != "" {
			t.Errorf("left uncommitted: %s", s)
		}
		if s := git(t, r.Root, "status", "--porcelain"); s != "" {
			t.Errorf("the workspace's checkout changed: %s", s)
		}
	})
	t.Run("Changed lists committed and uncommitted files against the base", func(t *testing.T) {
		write(t, filepath.Join(wt.Path, "later.txt"), "uncommitted\n")
		write(t, filepath.Join(wt.Path, "README"), "edited, not committed\n")
		files, err := r.Changed(ctx, wt)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"README", "later.txt", "src/a.go", "src/new/b.go", "src/old.txt"}
		if !slices.Equal(files, want) {
			t.Errorf("Changed = %q, want %q", files, want)
		}
		os.RemoveAll(wt.Path)
		files, err = r.Changed(ctx, wt)
		want = []string{"src/a.go", "src/new/b.go", "src/old.txt"}
		if err != nil || !slices.Equal(files, want) {
			t.Errorf("Changed of a removed worktree = %q, %v; want the branch's %q", files, err, want)
		}
	})
}

func TestRemove(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	keep, err := r.Add(ctx, wtPath(r, "keep"), "acpflow/keep", "")
	if err != nil {
		t.Fatal(err)
	}
	drop, err := r.Add(ctx, wtPath(r, "drop"), "acpflow/drop", "")
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(drop.Path, "junk.txt"), "uncommitted\n")
	write(t, filepath.Join(drop.Path, "README"), "modified\n")
	if err := r.Remove(ctx, drop, true); err != nil {
		t.Fatal(err)
	}
	if err := r.Remove(ctx, keep, false); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{drop.Path, keep.Path} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s still there: %v", p, err)
		}
	}
	if got := git(t, r.Root, "branch", "--list", "acpflow/*"); got != "acpflow/keep" {
		t.Errorf("branches left: %q, want only acpflow/keep", got)
	}
	if got := git(t, r.Root, "worktree", "list", "--porcelain"); strings.Count(got, "worktree ") != 1 {
		t.Errorf("git worktree list:\n%s", got)
	}
	t.Run("removing what is already gone is not an error", func(t *testing.T) {
		if err := r.Remove(ctx, drop, true); err != nil {
			t.Fatal(err)
		}
		if err := r.Remove(ctx, Worktree{Path: wtPath(r, "never"), Branch: "acpflow/never"}, true); err != nil {
			t.Fatal(err)
		}
	})
}

func TestList(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	a, err := r.Add(ctx, wtPath(r, "a"), "acpflow/a", "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.Add(ctx, wtPath(r, "b"), "acpflow/b", "")
	if err != nil {
		t.Fatal(err)
	}
	git(t, r.Root, "worktree", "add", "-q", "-b", "users-own", wtPath(r, "users-own"))
	git(t, r.Root, "worktree", "lock", b.Path)
	os.RemoveAll(b.Path)
	ls, err := r.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []Listed{
		{Worktree: Worktree{Path: a.Path, Branch: "acpflow/a"}, Exists: true, HEAD: a.BaseCommit},
		{Worktree: Worktree{Path: b.Path, Branch: "acpflow/b"}, Exists: false, Locked: true, HEAD: b.BaseCommit},
	}
	if !slices.Equal(ls, want) {
		t.Fatalf("List =\n%+v\nwant\n%+v", ls, want)
	}
}

// TestPruneAfterACrashMidAdd sets up what a killed `git worktree add`
// leaves (git locks a worktree "initializing" until its checkout is done)
// and what a killed git in a worktree leaves (its index.lock), with and
// without the worktree's directory.
func TestPruneAfterACrashMidAdd(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	admin := func(wt Worktree) string {
		return filepath.Join(r.Root, ".git", "worktrees", filepath.Base(wt.Path))
	}
	var wts []Worktree
	for _, n := range []string{"half", "gone", "gonelocked", "fine"} {
		wt, err := r.Add(ctx, wtPath(r, n), BranchPrefix+n, "")
		if err != nil {
			t.Fatal(err)
		}
		wts = append(wts, wt)
	}
	half, gone, goneLocked, fine := wts[0], wts[1], wts[2], wts[3]
	// Killed mid-checkout: locked, partial directory.
	write(t, filepath.Join(admin(half), "locked"), "initializing")
	os.Remove(filepath.Join(half.Path, "README"))
	// Killed before checkout began: locked, no directory, an index lock.
	write(t, filepath.Join(admin(gone), "locked"), "initializing")
	write(t, filepath.Join(admin(gone), "index.lock"), "")
	os.RemoveAll(gone.Path)
	// A worktree locked while in use, whose directory was then deleted.
	git(t, r.Root, "worktree", "lock", "--reason", "acpflow run", goneLocked.Path)
	os.RemoveAll(goneLocked.Path)

	// The user's own worktree, locked on a removable disk that is away, is
	// not acpflow's to prune.
	users := wtPath(r, "users")
	git(t, r.Root, "worktree", "add", "-q", "-b", "users", users)
	git(t, r.Root, "worktree", "lock", "--reason", "on a USB disk", users)
	os.RemoveAll(users)

	if err := r.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	got := git(t, r.Root, "worktree", "list", "--porcelain")
	if strings.Count(got, "worktree ") != 3 || !strings.Contains(got, fine.Path) || !strings.Contains(got, "locked on a USB disk") || strings.Contains(got, "initializing") || strings.Contains(got, "locked acpflow run") {
		t.Fatalf("git worktree list after Prune, want only the checkout, %s and the user's %s:\n%s", fine.Path, users, got)
	}
	if _, err := os.Stat(half.Path); !os.IsNotExist(err) {
		t.Errorf("half-added %s still there: %v", half.Path, err)
	}
	assertWorktrees(t, r, 1)
	// Every branch left can now be removed with git.
	for _, wt := range wts[:3] {
		if err := r.Remove(ctx, wt, true); err != nil {
			t.Errorf("Remove %s after Prune: %v", wt.Branch, err)
		}
	}
	if got := git(t, r.Root, "for-each-ref", "--format=%(refname:short)", "refs/heads/acpflow/"); got != "acpflow/fine" {
		t.Errorf("branches left: %q", got)
	}
}

func TestHonoursGitEnvironmentOfAParentGit(t *testing.T) {
	// acpflow started from a git hook inherits GIT_DIR; it must still act
	// on the workspace's repository.
	ctx := context.Background()
	r := newRepo(t)
	other := newRepo(t)
	t.Setenv("GIT_DIR", filepath.Join(other.Root, ".git"))
	t.Setenv("GIT_INDEX_FILE", filepath.Join(other.Root, ".git", "index"))
	wt, err := r.Add(ctx, wtPath(r, "env"), "acpflow/env", "")
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(wt.Path, "x"), "x\n")
	if _, _, err := r.Commit(ctx, wt, "m"); err != nil {
		t.Fatal(err)
	}
	os.Unsetenv("GIT_DIR")
	os.Unsetenv("GIT_INDEX_FILE")
	if got := git(t, other.Root, "branch", "--list", "acpflow/*"); got != "" {
		t.Errorf("the other repository got %q", got)
	}
}

// processGone tells whether pid has exited (a zombie waiting for its
// parent to reap it counts as gone).
func processGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] == 'Z'
}

// blockCheckouts sets a smudge filter that holds the checkout of `git
// worktree add` still until the test ends it; the filter writes its pid to
// the file returned when it starts.
func blockCheckouts(t *testing.T, r *Repo) (started string) {
	started = filepath.Join(t.TempDir(), "started")
	write(t, filepath.Join(r.Root, ".gitattributes"), "README filter=block\n")
	git(t, r.Root, "add", "-A")
	git(t, r.Root, "commit", "-q", "-m", "attributes")
	git(t, r.Root, "config", "filter.block.smudge", fmt.Sprintf("echo $$ > %s.tmp && mv %s.tmp %s && exec sleep 300", started, started, started))
	return started
}

// waitForPid waits for the pid a blocked filter writes, failing if done
// says the process that should block ended first.
func waitForPid(t *testing.T, started string, done <-chan error) int {
	t.Helper()
	for {
		select {
		case err := <-done:
			t.Fatalf("ended before its checkout was stopped: %v", err)
		default:
		}
		if b, err := os.ReadFile(started); err == nil {
			if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pid > 0 {
				return pid
			}
		}
		pause()
	}
}

// TestPruneAfterAKillMidAdd kills -9 an acpflow process and its git in the
// middle of an Add, leaving what a real crash leaves, then prunes.
func TestPruneAfterAKillMidAdd(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc to see processes")
	}
	ctx := context.Background()
	r := newRepo(t)
	started := blockCheckouts(t, r)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("WORKTREE_TEST_ADD=%s|killed|1", r.Root))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	pid := waitForPid(t, started, done)
	// git runs in a process group of its own: kill acpflow, then git's group.
	pgid, err := syscall.Getpgid(pid)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Process.Kill()
	<-done
	syscall.Kill(-pgid, syscall.SIGKILL)
	for give := time.Now().Add(time.Minute); syscall.Kill(-pgid, 0) == nil; pause() {
		if time.Now().After(give) {
			t.Fatalf("git's process group %d is still there after kill -9", pgid)
		}
	}
	path := wtPath(r, "killed-0")
	if got := git(t, r.Root, "worktree", "list", "--porcelain"); !strings.Contains(got, "locked initializing") {
		t.Fatalf("the kill left no half-added worktree to prune:\n%s", got)
	}
	if err := r.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	if got := git(t, r.Root, "worktree", "list", "--porcelain"); strings.Count(got, "worktree ") != 1 {
		t.Fatalf("git worktree list after Prune:\n%s", got)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("%s left: %v", path, err)
	}
	if err := r.Remove(ctx, Worktree{Path: path, Branch: "acpflow/killed-0"}, true); err != nil {
		t.Fatal(err)
	}
	if got := git(t, r.Root, "for-each-ref", "refs/heads/acpflow/"); got != "" {
		t.Errorf("branch left: %s", got)
	}
}

func TestCancelledAddLeavesNothing(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc to see processes")
	}
	r := newRepo(t)
	started := blockCheckouts(t, r)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	path := wtPath(r, "cancelled")
	go func() {
		_, err := r.Add(ctx, path, "acpflow/cancelled", "")
		done <- err
	}()
	pid := waitForPid(t, started, done)
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Add: %v, want context.Canceled", err)
	}
	// A generous bound, only so that a regression fails instead of hanging.
	for give := time.Now().Add(time.Minute); !processGone(pid); pause() {
		if time.Now().After(give) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the checkout's filter (pid %d) outlived the cancelled Add", pid)
		}
	}
	if got := git(t, r.Root, "worktree", "list", "--porcelain"); strings.Count(got, "worktree ") != 1 {
		t.Errorf("git worktree list after a cancelled add:\n%s", got)
	}
	if got := git(t, r.Root, "for-each-ref", "refs/heads/acpflow/"); got != "" {
		t.Errorf("branch left: %s", got)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("%s left: %v", path, err)
	}
}

func TestCommitRefusesAWorktreeTheAgentSwitched(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	wt, err := r.Add(ctx, wtPath(r, "sw"), "acpflow/sw", "")
	if err != nil {
		t.Fatal(err)
	}
	git(t, wt.Path, "checkout", "-q", "-b", "elsewhere")
	write(t, filepath.Join(wt.Path, "x"), "x\n")
	_, _, err = r.Commit(ctx, wt, "m")
	mustContain(t, err, "on elsewhere, not on its branch acpflow/sw", "nothing committed")
}

// An agent may rewrite the .git file of its worktree to point acpflow's
// git at a repository of its own, whose configuration names a filter to
// run on every file. Status, Changed, Commit and Remove read the worktree
// through its administrative directory instead: the agent's filter never
// runs, the commit lands on the worktree's branch in the real repository,
// and the worktree can still be removed.
func TestGitOnAWorktreeIgnoresTheGitFileTheAgentWrote(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	wt, err := r.Add(ctx, wtPath(r, "hostile"), "acpflow/hostile", "")
	if err != nil {
		t.Fatal(err)
	}
	pwned := filepath.Join(t.TempDir(), "pwned")
	evil := filepath.Join(t.TempDir(), "evil")
	git(t, filepath.Dir(evil), "init", "-q", evil)
	git(t, evil, "symbolic-ref", "HEAD", "refs/heads/acpflow/hostile")
	for _, kv := range [][2]string{
		{"filter.evil.clean", "touch " + pwned + "; cat"},
		{"filter.evil.required", "true"},
		{"core.fsmonitor", "touch " + pwned + "-fsmonitor"},
	} {
		git(t, evil, "config", kv[0], kv[1])
	}
	write(t, filepath.Join(wt.Path, ".gitattributes"), "* filter=evil\n")
	write(t, filepath.Join(wt.Path, "x.txt"), "x\n")
	write(t, filepath.Join(wt.Path, ".git"), "gitdir: "+filepath.Join(evil, ".git")+"\n")

	st, err := r.Status(ctx, wt)
	if err != nil || st.Head != "acpflow/hostile" || !slices.Equal(st.Uncommitted, []string{".gitattributes", "x.txt"}) {
		t.Errorf("Status = %+v, %v; want on acpflow/hostile with .gitattributes and x.txt uncommitted", st, err)
	}
	if files, err := r.Changed(ctx, wt); err != nil || !slices.Equal(files, []string{".gitattributes", "x.txt"}) {
		t.Errorf("Changed = %q, %v", files, err)
	}
	ranEvil := func() {
		t.Helper()
		for _, p := range []string{pwned, pwned + "-fsmonitor"} {
			if _, err := os.Stat(p); err == nil {
				t.Errorf("acpflow's git ran the agent's configuration (%s exists)", p)
			}
		}
	}
	c, files, err := r.Commit(ctx, wt, "m")
	if err != nil || !slices.Equal(files, []string{".gitattributes", "x.txt"}) {
		ranEvil()
		t.Fatalf("Commit = %q, %q, %v", c, files, err)
	}
	if got := git(t, r.Root, "rev-parse", "acpflow/hostile"); got != c {
		t.Errorf("the branch is at %s, Commit said %s", got, c)
	}
	if err := r.Remove(ctx, wt, false); err != nil {
		t.Fatalf("Remove of a worktree whose .git file was rewritten: %v", err)
	}
	if _, err := os.Stat(wt.Path); !os.IsNotExist(err) {
		t.Errorf("the worktree is still there: %v", err)
	}
	if wl := git(t, r.Root, "worktree", "list", "--porcelain"); strings.Contains(wl, wt.Path) {
		t.Errorf("git still lists it:\n%s", wl)
	}
	if got := git(t, r.Root, "rev-parse", "acpflow/hostile"); got != c {
		t.Errorf("the branch moved to %s", got)
	}
	ranEvil()
}

// Status tells what a worktree holds that its branch does not, over the
// kinds of change: none, untracked, ignored (not a change), modified,
// staged, deleted, renamed, a name with spaces and a newline, and a HEAD
// moved off the branch.
func TestStatus(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	for _, c := range []struct {
		name   string
		change func(dir string)
		head   string
		want   []string
	}{
		{"clean", func(string) {}, "", nil},
		{"ignored only", func(d string) { write(t, filepath.Join(d, "build.log"), "x") }, "", nil},
		{"untracked", func(d string) { write(t, filepath.Join(d, "new/n.txt"), "x") }, "", []string{"new/n.txt"}},
		{"modified", func(d string) { write(t, filepath.Join(d, "README"), "changed\n") }, "", []string{"README"}},
		{"staged", func(d string) {
			write(t, filepath.Join(d, "s.txt"), "x")
			git(t, d, "add", "s.txt")
		}, "", []string{"s.txt"}},
		{"deleted", func(d string) { os.Remove(filepath.Join(d, "src/old.txt")) }, "", []string{"src/old.txt"}},
		{"renamed", func(d string) { git(t, d, "mv", "src/old.txt", "src/moved.txt") }, "", []string{"src/moved.txt"}},
		{"odd names", func(d string) { write(t, filepath.Join(d, "a b\nc.txt"), "x") }, "", []string{"a b\nc.txt"}},
		{"detached", func(d string) { git(t, d, "checkout", "-q", "--detach") }, "-", nil},
		{"another branch", func(d string) { git(t, d, "checkout", "-q", "-b", "acpflow-elsewhere") }, "acpflow-elsewhere", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := strings.ReplaceAll(c.name, " ", "-")
			wt, err := r.Add(ctx, wtPath(r, name), "acpflow/st-"+name, "")
			if err != nil {
				t.Fatal(err)
			}
			c.change(wt.Path)
			st, err := r.Status(ctx, wt)
			head := wt.Branch
			switch c.head {
			case "-":
				head = ""
			case "":
			default:
				head = c.head
			}
			if err != nil || st.Head != head || !slices.Equal(st.Uncommitted, c.want) {
				t.Errorf("Status = %+v, %v; want head %q, uncommitted %q", st, err, head, c.want)
			}
		})
	}
}

// Ahead counts a branch's own commits: none after Add, one after a
// commit, none for a branch that is gone.
func TestAhead(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	wt, err := r.Add(ctx, wtPath(r, "ahead"), "acpflow/ahead", "")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := r.Ahead(ctx, wt.Branch, wt.BaseCommit); n != 0 || err != nil {
		t.Errorf("Ahead of a new branch = %d, %v", n, err)
	}
	write(t, filepath.Join(wt.Path, "x"), "x\n")
	if _, _, err := r.Commit(ctx, wt, "m"); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Ahead(ctx, wt.Branch, wt.BaseCommit); n != 1 || err != nil {
		t.Errorf("Ahead after a commit = %d, %v", n, err)
	}
	if n, err := r.Ahead(ctx, "acpflow/none", wt.BaseCommit); n != 0 || err != nil {
		t.Errorf("Ahead of a branch that is gone = %d, %v", n, err)
	}
}

// Two worktrees whose directories share a name get administrative
// directories of different names from git; each is read through its own.
func TestStatusOfTwoWorktreesOfOneName(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	one, err := r.Add(ctx, filepath.Join(filepath.Dir(r.Root), "one", "same"), "acpflow/one", "")
	if err != nil {
		t.Fatal(err)
	}
	two, err := r.Add(ctx, filepath.Join(filepath.Dir(r.Root), "two", "same"), "acpflow/two", "")
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(two.Path, "only-in-two"), "x")
	for _, c := range []struct {
		wt   Worktree
		want []string
	}{{one, nil}, {two, []string{"only-in-two"}}} {
		st, err := r.Status(ctx, c.wt)
		if err != nil || st.Head != c.wt.Branch || !slices.Equal(st.Uncommitted, c.want) {
			t.Errorf("Status of %s = %+v, %v; want %q on %s", c.wt.Path, st, err, c.want, c.wt.Branch)
		}
	}
	if _, err := r.Status(ctx, Worktree{Path: filepath.Join(filepath.Dir(r.Root), "never"), Branch: "acpflow/never"}); err == nil || !strings.Contains(err.Error(), "is not one of the worktrees of") {
		t.Errorf("Status of an unknown worktree: %v", err)
	}
}
