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
	// Why says why prune removed it (PruneWorktrees).
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
			if r.Status == engine.StatusRunning && !info.InUse {
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

// PruneWorktrees removes the worktrees of runs that are over (ended, or
// whose acpflow died) and that hold no change, with their branches; it
// forgets those whose directory vanished (deleting the branch unless it
// has commits), clears what a crash left half-made, and runs git's own
// prune in every repository it saw. Worktrees that hold changes, and
// those a live acpflow works in, stay. It returns what it removed.
func (v *Service) PruneWorktrees(ctx context.Context) ([]WorktreeInfo, error) {
	list, err := v.Worktrees(ctx)
	if err != nil {
		return nil, err
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
	var removed []WorktreeInfo
	var errs []error
	for _, l := range list {
		if l.InUse {
			continue
		}
		repo, err := repoOf(l.Repo)
		if err != nil {
			errs = append(errs, fmt.Errorf("worktree %s: %w", l.Path, err))
			continue
		}
		var why string
		deleteBranch := len(l.Changed) == 0
		switch {
		case !l.Exists:
			why = "its directory vanished"
		case l.BaseCommit == "" && !l.recorded:
			// A crash mid-add, before the run was recorded: no agent
			// worked in it.
			why, deleteBranch = "a crash left it half-made", true
		case len(l.Changed) == 0:
			why = "its run is over and changed nothing"
		default:
			continue
		}
		if err := repo.Remove(ctx, gitWorktree(l), deleteBranch); err != nil {
			errs = append(errs, err)
			continue
		}
		// A directory git never registered (the crash came first) is
		// acpflow's own, in acpflow's own directory.
		if _, err := os.Stat(l.Path); err == nil {
			os.RemoveAll(l.Path)
		}
		os.Remove(l.mark)
		if err := v.forget(ctx, l, deleteBranch); err != nil {
			errs = append(errs, err)
		}
		l.Why = why
		removed = append(removed, l)
	}
	roots := map[string]bool{}
	for _, l := range list {
		roots[l.Repo] = true
	}
	recs, err := v.store.ListWorktrees(ctx)
	if err == nil {
		for _, r := range recs {
			if root, err := repoRoot(ctx, r.Workspace); err == nil {
				roots[root] = true
			}
		}
	}
	for _, root := range sortedKeys(roots) {
		repo, err := repoOf(root)
		if err != nil {
			continue // a repository that is gone has nothing to prune
		}
		if err := repo.Prune(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
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
