package worktree

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// ownGitDir is the git directory acpflow's git uses for one operation on a
// worktree (SPEC §10, "Containment outlives the step"): a private
// directory acpflow makes and removes, holding only the worktree's HEAD
// (read and checked by acpflow) and a commondir file naming the common git
// directory acpflow found when it opened the repository.
//
// # Notes
//
// git would otherwise read, besides the worktree's .git file (which the
// agent wrote), the administrative directory git keeps for the worktree
// (.git/worktrees/NAME): its commondir file decides where refs are read
// and written (git 2.39 reads it even when GIT_COMMON_DIR is set), and its
// config.worktree is configuration (read when the repository enables
// extensions.worktreeConfig). An agent that can write that directory (a
// sandbox whose write: reaches the repository, or no sandbox) could make
// acpflow's git run a program of its choosing, or commit onto refs of
// another repository. Through ownGitDir git reads no file of that
// directory but the index (data, used in place through GIT_INDEX_FILE, so
// git's own index.lock guards it); its configuration is the system's, the
// user's and the repository's own .git/config, with baseConfig over them.
type ownGitDir struct {
	dir  string // the private git directory
	head string // the branch the worktree's HEAD names ("" when detached)
	env  []string
	path string // the worktree
}

// headRef is the HEAD of a worktree on a branch; headCommit a detached one.
var (
	headRef    = regexp.MustCompile(`^ref: (refs/heads/[^\x00-\x20~^:?*\[\\]+)$`)
	headCommit = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)
)

// openGitDir makes the private git directory for an operation on wt; its
// close removes it.
func (r *Repo) openGitDir(ctx context.Context, wt Worktree) (*ownGitDir, error) {
	common, err := r.gitCommonDir(ctx)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(wt.Path)
	if err != nil {
		return nil, fmt.Errorf("worktree %s: %w", wt.Path, err)
	}
	admin := adminDir(common, abs)
	if admin == "" {
		return nil, fmt.Errorf("worktree %s is not one of the worktrees of %s (`git worktree list` there does not show it)", abs, r.Root)
	}
	head, branch, err := readHead(admin)
	if err != nil {
		return nil, fmt.Errorf("worktree %s: %w", abs, err)
	}
	dir, err := os.MkdirTemp("", "acpflow-git-")
	if err != nil {
		return nil, fmt.Errorf("worktree %s: %w", abs, err)
	}
	g := &ownGitDir{dir: dir, head: branch, path: abs}
	if err := g.fill(head, common, admin); err != nil {
		g.close()
		return nil, fmt.Errorf("worktree %s: %w", abs, err)
	}
	g.env = []string{
		"GIT_DIR=" + dir, "GIT_COMMON_DIR=" + common, "GIT_WORK_TREE=" + abs,
		"GIT_INDEX_FILE=" + filepath.Join(admin, "index"),
	}
	return g, nil
}

// readHead reads the HEAD file of the administrative directory admin as
// data: a branch (returned with its name) or a detached commit.
func readHead(admin string) (head, branch string, err error) {
	b, err := os.ReadFile(filepath.Join(admin, "HEAD"))
	if err != nil {
		return "", "", fmt.Errorf("reading its HEAD: %w", err)
	}
	head = strings.TrimSpace(string(b))
	if m := headRef.FindStringSubmatch(head); m != nil && !strings.Contains(m[1], "..") {
		return head, strings.TrimPrefix(m[1], "refs/heads/"), nil
	}
	if headCommit.MatchString(head) {
		return head, "", nil
	}
	return "", "", fmt.Errorf("its HEAD (%s) names neither a branch nor a commit", filepath.Join(admin, "HEAD"))
}

// fill writes the private directory's HEAD and commondir, and copies the
// shared index files a split index needs (git looks for them beside HEAD).
func (g *ownGitDir) fill(head, common, admin string) error {
	if err := os.WriteFile(filepath.Join(g.dir, "HEAD"), []byte(head+"\n"), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(g.dir, "commondir"), []byte(common+"\n"), 0o600); err != nil {
		return err
	}
	shared, _ := filepath.Glob(filepath.Join(admin, "sharedindex.*"))
	for _, s := range shared {
		if err := copyFile(s, filepath.Join(g.dir, filepath.Base(s))); err != nil {
			return err
		}
	}
	return nil
}

// copyFile copies the regular file from to to, never following a link.
func copyFile(from, to string) error {
	fi, err := os.Lstat(from)
	if err != nil || !fi.Mode().IsRegular() {
		return err
	}
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func (g *ownGitDir) close() { os.RemoveAll(g.dir) }

// git runs git args on the worktree through the private directory.
func (g *ownGitDir) git(ctx context.Context, env []string, args ...string) ([]byte, error) {
	return run(ctx, g.path, append(append([]string(nil), g.env...), env...), args...)
}

// gitRetrying is git through runRetrying, for commands that take the
// index's or a ref's lock.
func (g *ownGitDir) gitRetrying(ctx context.Context, env []string, args ...string) ([]byte, error) {
	return runRetrying(ctx, g.path, append(append([]string(nil), g.env...), env...), args...)
}
