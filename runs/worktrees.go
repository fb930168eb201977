package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/internal/procgroup"
	"github.com/acpflow/acpflow/runs/store"
	"github.com/acpflow/acpflow/runs/worktree"
)

// WorktreeInfo is a worktree acpflow made that is still there (or whose
// directory vanished while git still lists it), as `acpflow worktrees`
// lists it.
type WorktreeInfo struct {
	RunID    string `json:"run_id"`
	Workflow string `json:"workflow,omitempty"`
	// RunStatus is the status of its run as recorded; "interrupted" when
	// the record says running and no acpflow runs it; "unrecorded" when a
	// crash came before the run was recorded.
	RunStatus  string    `json:"run_status"`
	Path       string    `json:"path"`
	Branch     string    `json:"branch"`
	Base       string    `json:"base,omitempty"`
	BaseCommit string    `json:"base_commit,omitempty"`
	Step       string    `json:"step,omitempty"`
	Index      *int      `json:"index,omitempty"`
	Repo       string    `json:"repo"`
	Created    time.Time `json:"created"`
	// Exists says the directory is there; Changed lists the files its
	// branch and directory change against the base.
	Exists  bool     `json:"exists"`
	Changed []string `json:"changed"`
	// InUse says a live acpflow works in it (a run going on).
	InUse bool `json:"in_use"`
	// Why says why prune removed or kept it (PruneWorktrees).
	Why string `json:"why,omitempty"`

	mark string // the mark file
	// recorded says the run store knows the worktree: it was made before
	// its run started, so an agent may have worked in it.
	recorded bool
}

// Worktrees lists the worktrees acpflow made beside this run store that
// are still there, oldest first.
func (v *Service) Worktrees(ctx context.Context) ([]WorktreeInfo, error) {
	recs, err := v.store.ListWorktrees(ctx)
	if err != nil {
		return nil, err
	}
	byPath := map[string]*engine.Worktree{}
	runOf := map[string]store.RunWorktrees{}
	for _, r := range recs {
		runOf[r.RunID] = r
		for _, wt := range r.Worktrees {
			byPath[wt.Path] = wt
		}
	}
	marks, err := filepath.Glob(filepath.Join(WorktreeDir(v.store.Path()), "*.json"))
	if err != nil {
		return nil, err
	}
	var out []WorktreeInfo
	for _, m := range marks {
		b, err := os.ReadFile(m)
		if err != nil {
			continue
		}
		var mk mark
		if err := json.Unmarshal(b, &mk); err != nil || mk.RunID == "" {
			continue // not acpflow's
		}
		info := WorktreeInfo{
			RunID: mk.RunID, Path: strings.TrimSuffix(m, ".json"), Branch: mk.Branch, BaseCommit: mk.BaseCommit,
			Repo: mk.Repo, Created: mk.Created, mark: m,
			InUse: procgroup.Alive(mk.PID, mk.StartTicks),
		}
		if wt := byPath[info.Path]; wt != nil {
			info.recorded = true
			info.Base, info.Step, info.Index = wt.Base, wt.Step, wt.Index
			if info.BaseCommit == "" {
				info.BaseCommit = wt.BaseCommit
			}
		}
		info.RunStatus = "unrecorded"
		if r, ok := runOf[mk.RunID]; ok {
			info.Workflow, info.RunStatus = r.Workflow, string(r.Status)
			if r.Status.Live() && !info.InUse {
				info.RunStatus = "interrupted"
			}
		}
		if _, err := os.Stat(info.Path); err == nil {
			info.Exists = true
		}
		if info.BaseCommit != "" {
			if repo, err := worktree.Open(ctx, info.Repo); err == nil {
				info.Changed, _ = repo.Changed(ctx, gitWorktree(info))
			}
		}
		if info.Changed == nil {
			info.Changed = []string{}
		}
		out = append(out, info)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

func gitWorktree(i WorktreeInfo) worktree.Worktree {
	return worktree.Worktree{Path: i.Path, Branch: i.Branch, Base: i.Base, BaseCommit: i.BaseCommit}
}

// Pruned is what PruneWorktrees did: the worktrees it removed and those
// it kept, each with its Why.
type Pruned struct {
	Removed []WorktreeInfo `json:"removed"`
	Kept    []WorktreeInfo `json:"kept"`
}

// PruneWorktrees removes the worktrees of runs that are over (ended, or
// whose acpflow died) and that hold nothing uncommitted: their changes are
// safe on their branches, which stay (a branch with no commit of its own
// goes with its worktree). A worktree that holds uncommitted changes, or
// is not on its branch, is kept unless force; one a live acpflow works in
// is kept always. It also forgets worktrees whose directory vanished
// (deleting a branch without commits), clears what a crash left
// half-made, and runs git's own prune in every repository it saw.
func (v *Service) PruneWorktrees(ctx context.Context, force bool) (Pruned, error) {
	var done Pruned
	list, err := v.Worktrees(ctx)
	if err != nil {
		return done, err
	}
	repos := map[string]*worktree.Repo{}
	repoOf := func(root string) (*worktree.Repo, error) {
		if r := repos[root]; r != nil {
			return r, nil
		}
		r, err := worktree.Open(ctx, root)
		if err != nil {
			return nil, err
		}
		repos[root] = r
		return r, nil
	}
	var errs []error
	for _, l := range list {
		if l.InUse {
			l.Why = "its run is still going (a live acpflow works in it); never removed, --force or not"
			done.Kept = append(done.Kept, l)
			continue
		}
		repo, err := repoOf(l.Repo)
		if err != nil {
			errs = append(errs, fmt.Errorf("worktree %s: %w", l.Path, err))
			continue
		}
		verdict, err := judge(ctx, repo, l, force)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		l.Why = verdict.why
		if !verdict.remove {
			done.Kept = append(done.Kept, l)
			continue
		}
		if err := v.removeWorktree(ctx, repo, l, verdict.deleteBranch); err != nil {
			errs = append(errs, err)
			continue
		}
		done.Removed = append(done.Removed, l)
	}
	errs = append(errs, v.pruneRepos(ctx, list, repoOf)...)
	return done, errors.Join(errs...)
}

// verdict is what prune does with one worktree, and why.
type verdict struct {
	remove, deleteBranch bool
	why                  string
}

// judge decides what prune does with l, a worktree no live acpflow works
// in (see PruneWorktrees).
func judge(ctx context.Context, repo *worktree.Repo, l WorktreeInfo, force bool) (verdict, error) {
	switch {
	case !l.Exists:
		ahead, err := branchAhead(ctx, repo, l)
		return verdict{true, ahead == 0, "its directory vanished"}, err
	case l.BaseCommit == "" && !l.recorded:
		// A crash mid-add, before the run was recorded: no agent
		// worked in it.
		return verdict{true, true, "a crash left it half-made"}, nil
	}
	st, err := repo.Status(ctx, gitWorktree(l))
	if err != nil {
		return verdict{}, err
	}
	var held, remedy string
	switch {
	case st.Head != l.Branch:
		head := st.Head
		if head == "" {
			head = "a detached HEAD"
		}
		held = fmt.Sprintf("it is on %s, not on its branch: what was committed there is not on %s", head, l.Branch)
		remedy = "switch it back to its branch, or --force removes it"
	case len(st.Uncommitted) > 0:
		held = "it holds uncommitted changes (" + fileList(st.Uncommitted) + ")"
		remedy = "commit them on its branch, or --force discards them"
		if l.RunStatus == "interrupted" {
			// Its acpflow died before the commit at the run's end.
			remedy = "acpflow resume " + l.RunID + " finishes the run and commits them, or --force discards them"
		}
	}
	if held != "" && !force {
		return verdict{why: held + "; " + remedy}, nil
	}
	ahead, err := branchAhead(ctx, repo, l)
	if err != nil {
		return verdict{}, err
	}
	why := "its run is over and changed nothing"
	switch {
	case held != "":
		why = "its run is over; --force removed it though " + held
	case ahead > 0:
		why = "its run is over and its changes are committed on its branch, which stays"
	}
	return verdict{true, ahead == 0, why}, nil
}

// branchAhead counts the commits on l's branch that its base has not
// (1 when the base is unknown: the branch may hold work).
func branchAhead(ctx context.Context, repo *worktree.Repo, l WorktreeInfo) (int, error) {
	if l.BaseCommit == "" {
		return 1, nil
	}
	return repo.Ahead(ctx, l.Branch, l.BaseCommit)
}

// fileList names up to five files, and how many more there are.
func fileList(files []string) string {
	const shown = 5
	if len(files) <= shown {
		return strings.Join(files, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(files[:shown], ", "), len(files)-shown)
}

// removeWorktree removes l (and its branch when deleteBranch), its mark,
// and records in its run that it is gone.
func (v *Service) removeWorktree(ctx context.Context, repo *worktree.Repo, l WorktreeInfo, deleteBranch bool) error {
	if err := repo.Remove(ctx, gitWorktree(l), deleteBranch); err != nil {
		return err
	}
	// A directory git never registered (the crash came first) is
	// acpflow's own, in acpflow's own directory.
	if _, err := os.Stat(l.Path); err == nil {
		os.RemoveAll(l.Path)
	}
	os.Remove(l.mark)
	return v.forget(ctx, l, deleteBranch)
}

// pruneRepos runs git's own prune (Repo.Prune) in every repository that
// list or a recorded run names.
func (v *Service) pruneRepos(ctx context.Context, list []WorktreeInfo, repoOf func(string) (*worktree.Repo, error)) []error {
	roots := map[string]bool{}
	for _, l := range list {
		roots[l.Repo] = true
	}
	if recs, err := v.store.ListWorktrees(ctx); err == nil {
		for _, r := range recs {
			if root, err := repoRoot(ctx, r.Workspace); err == nil {
				roots[root] = true
			}
		}
	}
	var errs []error
	for _, root := range sortedKeys(roots) {
		repo, err := repoOf(root)
		if err != nil {
			continue // a repository that is gone has nothing to prune
		}
		if err := repo.Prune(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

func repoRoot(ctx context.Context, workspace string) (string, error) {
	r, err := worktree.Open(ctx, workspace)
	if err != nil {
		return "", err
	}
	return r.Root, nil
}

// forget records in l's run that its worktree is gone (and its branch,
// when deleted), so that a resume makes a new one instead of failing.
func (v *Service) forget(ctx context.Context, l WorktreeInfo, branchGone bool) error {
	wts, err := v.store.GetRunWorktrees(ctx, l.RunID)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err
	}
	for _, wt := range wts {
		if wt.Path == l.Path {
			wt.Kept = engine.KeptBranch
			if branchGone {
				wt.Kept = engine.KeptNothing
			}
		}
	}
	return v.store.SetRunWorktrees(ctx, l.RunID, wts)
}
