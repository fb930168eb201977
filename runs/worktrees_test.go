package runs_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/runs"
)

// gitIn runs git in dir, failing the test on error.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// What a kill -9 leaves when it comes after the mark and during or just
// after `git worktree add`, before the run is recorded: a worktree git
// holds locked "initializing", a mark whose process is gone, no record.
// Prune removes it all, and its branch.
func TestPruneRemovesAWorktreeACrashLeftHalfAdded(t *testing.T) {
	ctx := context.Background()
	repo := filepath.Join(t.TempDir(), "repo")
	os.MkdirAll(repo, 0o755)
	gitIn(t, repo, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(repo, "f"), []byte("x\n"), 0o644)
	gitIn(t, repo, "add", ".")
	gitIn(t, repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "init")

	state := filepath.Join(t.TempDir(), "state.db")
	dir := runs.WorktreeDir(state)
	path := filepath.Join(dir, "20261205T000000-dead")
	gitIn(t, repo, "worktree", "add", "-q", "-b", "acpflow/20261205T000000-dead", path, "HEAD")
	gitIn(t, repo, "worktree", "lock", "--reason", "initializing", path)
	// The owner: a process that has exited.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	mark, _ := json.Marshal(map[string]any{"run_id": "20261205T000000-dead", "repo": repo, "branch": "acpflow/20261205T000000-dead", "pid": gone.Process.Pid, "start_ticks": 1})
	os.WriteFile(path+".json", mark, 0o644)

	svc, err := runs.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	list, err := svc.Worktrees(ctx)
	if err != nil || len(list) != 1 || list[0].InUse || list[0].RunStatus != "unrecorded" {
		t.Fatalf("listed %+v, %v", list, err)
	}
	done, err := svc.PruneWorktrees(ctx, false)
	if err != nil || len(done.Removed) != 1 || done.Removed[0].Why != "a crash left it half-made" {
		t.Fatalf("pruned %+v, %v", done, err)
	}
	if wl := gitIn(t, repo, "worktree", "list", "--porcelain"); strings.Contains(wl, "acpflow/") || strings.Contains(wl, "locked") {
		t.Errorf("git still lists:\n%s", wl)
	}
	if b := gitIn(t, repo, "branch", "--list", "acpflow/*"); b != "" {
		t.Errorf("branches left: %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("acpflow's worktree directory still holds %d entries", len(ents))
	}
	if locks, _ := filepath.Glob(filepath.Join(repo, ".git", "worktrees", "*", "*.lock")); len(locks) != 0 {
		t.Errorf("locks left: %v", locks)
	}
}

// A worktree a live acpflow works in is left alone.
func TestPruneLeavesAWorktreeInUse(t *testing.T) {
	ctx := context.Background()
	repo := filepath.Join(t.TempDir(), "repo")
	os.MkdirAll(repo, 0o755)
	gitIn(t, repo, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(repo, "f"), []byte("x\n"), 0o644)
	gitIn(t, repo, "add", ".")
	gitIn(t, repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "init")
	state := filepath.Join(t.TempDir(), "state.db")
	path := filepath.Join(runs.WorktreeDir(state), "20261205T000000-live")
	gitIn(t, repo, "worktree", "add", "-q", "-b", "acpflow/20261205T000000-live", path, "HEAD")
	me := runs.CurrentOwner()
	mark, _ := json.Marshal(map[string]any{"run_id": "20261205T000000-live", "repo": repo, "branch": "acpflow/20261205T000000-live", "pid": me.PID, "start_ticks": me.StartTicks})
	os.WriteFile(path+".json", mark, 0o644)
	svc, err := runs.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	// Not even --force removes it; prune says why it stays.
	for _, force := range []bool{false, true} {
		done, err := svc.PruneWorktrees(ctx, force)
		if err != nil || len(done.Removed) != 0 || len(done.Kept) != 1 || !strings.Contains(done.Kept[0].Why, "its run is still going") {
			t.Fatalf("--force=%v: pruned %+v, %v", force, done, err)
		}
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the worktree in use is gone: %v", err)
	}
}
