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
	"sync"
	"time"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/runs/store"
	"github.com/acpflow/acpflow/runs/worktree"
)

// WorktreeDir is where acpflow makes the worktrees of the runs recorded in
// the store at statePath: a directory `worktrees` beside it, which acpflow
// alone writes (never inside the user's repository, whose checkout stays
// clean). Without a store, a directory under the system's temp dir.
func WorktreeDir(statePath string) string {
	if statePath == "" {
		return filepath.Join(os.TempDir(), "acpflow-worktrees")
	}
	return filepath.Join(filepath.Dir(statePath), store.WorktreesDir)
}

// NeedsWorktrees says whether a run of wf works in worktrees: the
// workflow or one of its steps sets isolation.
func NeedsWorktrees(wf *engine.Workflow) bool {
	if wf.Isolation != nil {
		return true
	}
	for _, st := range wf.Steps {
		if st.Isolation != nil {
			return true
		}
	}
	return false
}

// PreflightWorktrees checks, before anything starts, what every run of wf
// in workspace needs of git: git installed, a repository, each base
// there, and a clean checkout where a base is HEAD. The error says which.
func PreflightWorktrees(ctx context.Context, wf *engine.Workflow, workspace string) error {
	if !NeedsWorktrees(wf) {
		return nil
	}
	repo, err := worktree.Open(ctx, workspace)
	if err != nil {
		return fmt.Errorf("isolation: worktree: %w", err)
	}
	bases := map[string]bool{}
	if wf.Isolation != nil {
		bases[wf.Isolation.Base] = true
	}
	for _, st := range wf.Steps {
		if st.Isolation != nil {
			bases[st.Isolation.Base] = true
		}
	}
	// Preflight wants a branch to check is free: a would-be run's, which
	// each run checks again for its own.
	probe := worktree.BranchPrefix + engine.NewRunID()
	for _, b := range sortedKeys(bases) {
		if _, err := repo.Preflight(ctx, b, probe); err != nil {
			return fmt.Errorf("isolation: worktree: %w", err)
		}
	}
	return nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// isolate sets req up for a run of wf that works in worktrees: the
// run's own made (or, resumed, taken up again) before anything starts,
// and the engine's opener of the steps' own. An error means the run
// cannot start: nothing ran.
func (r *Runner) isolate(ctx context.Context, wf *engine.Workflow, spec Spec, req *Request) error {
	if _, local := r.backend().(Local); !local {
		return errors.New("isolation: worktree: runs only on the local backend (the worktree must be on the machine that runs the agents)")
	}
	repo, err := worktree.Open(ctx, spec.Workspace)
	if err != nil {
		return fmt.Errorf("isolation: worktree: %w", err)
	}
	statePath := ""
	if r.Store != nil {
		statePath = r.Store.Path()
	}
	dir, err := filepath.Abs(WorktreeDir(statePath))
	if err != nil {
		return err
	}
	iso := &isolation{
		repo: repo, store: r.Store, runID: req.RunID, workflow: wf.Name, file: wf.File,
		dir: dir, byKey: map[string]*engine.Worktree{}, checked: &r.preflighted,
	}
	if spec.Resume && r.Store != nil {
		recorded, err := r.Store.GetRunWorktrees(ctx, req.RunID)
		if err != nil {
			return err
		}
		for _, wt := range recorded {
			iso.byKey[wt.Key()] = wt
		}
	}
	if wf.Isolation != nil {
		wt, err := iso.Open(ctx, "", nil, wf.Isolation)
		if err != nil {
			return fmt.Errorf("isolation: worktree: %w", err)
		}
		req.Worktree = wt
	}
	req.Worktrees = iso
	return nil
}

// isolation makes and ends one run's worktrees over the user's git
// (engine.Worktrees), and keeps their record in the run store as each
// is made and ended.
type isolation struct {
	repo           *worktree.Repo
	store          *store.Store
	runID          string
	workflow, file string
	dir            string
	checked        *sync.Map // repository and base → preflighted (Runner.preflighted)
	mu             sync.Mutex
	byKey          map[string]*engine.Worktree // recorded (resume) and made
}

var _ engine.Worktrees = (*isolation)(nil)

// Open implements engine.Worktrees: a new worktree on a new branch, or,
// for a run resumed, the one it had (a worktree that is gone is an error
// that says so, unless keep: removed it because nothing had changed).
func (iso *isolation) Open(ctx context.Context, step string, index *int, is *engine.Isolation) (*engine.Worktree, error) {
	key := engine.WorktreeKey(step, index)
	name := iso.runID
	if key != "" {
		name += "-" + key
	}
	path := filepath.Join(iso.dir, name)
	iso.mu.Lock()
	was := iso.byKey[key]
	iso.mu.Unlock()
	if was != nil && was.Kept != engine.KeptNothing {
		if _, err := os.Stat(was.Path); err != nil {
			return nil, fmt.Errorf("run %s: its worktree %s (branch %s) is gone, so the run cannot be resumed where it was: bring it back with `git worktree add %s %s`, or run the workflow again", iso.runID, was.Path, was.Branch, was.Path, was.Branch)
		}
		wt := *was
		wt.Commit, wt.Files, wt.FilesChanged, wt.Kept = "", nil, 0, ""
		if err := iso.mark(&wt); err != nil {
			return nil, err
		}
		return iso.keep(ctx, &wt), nil
	}
	branch := worktree.BranchPrefix + name
	// The base and the checkout are checked once per command (a status
	// of a large checkout costs as much as the add); Add checks that the
	// branch is new every time.
	checkKey := iso.repo.Root + "\x00" + is.Base
	if _, done := iso.checked.LoadOrStore(checkKey, true); !done {
		if _, err := iso.repo.Preflight(ctx, is.Base, branch); err != nil {
			iso.checked.Delete(checkKey)
			return nil, err
		}
	}
	wt := &engine.Worktree{Path: path, Branch: branch, Base: is.Base, Step: step, Index: index}
	// The mark goes first: a crash between it and the add leaves
	// something `acpflow worktrees --prune` finds.
	if err := os.MkdirAll(iso.dir, 0o755); err != nil {
		return nil, fmt.Errorf("worktree directory %s: %w", iso.dir, err)
	}
	if err := iso.mark(wt); err != nil {
		return nil, err
	}
	made, err := iso.repo.Add(ctx, path, branch, is.Base)
	if err != nil {
		os.Remove(markPath(path))
		return nil, err
	}
	wt.Path, wt.BaseCommit = made.Path, made.BaseCommit
	iso.mark(wt)
	return iso.keep(ctx, wt), nil
}

// keep puts wt among the run's worktrees and records them all.
func (iso *isolation) keep(ctx context.Context, wt *engine.Worktree) *engine.Worktree {
	iso.mu.Lock()
	iso.byKey[wt.Key()] = wt
	iso.mu.Unlock()
	iso.save(ctx)
	return wt
}

// save records the run's worktrees (a run not recorded yet gets them
// when it starts: Recorder.RunStarted).
func (iso *isolation) save(ctx context.Context) {
	if iso.store == nil {
		return
	}
	iso.store.SetRunWorktrees(ctx, iso.runID, iso.list())
}

// list is the run's worktrees, its own first, then by key.
func (iso *isolation) list() []*engine.Worktree {
	iso.mu.Lock()
	defer iso.mu.Unlock()
	keys := make([]string, 0, len(iso.byKey))
	for k := range iso.byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]*engine.Worktree, 0, len(keys))
	for _, k := range keys {
		c := *iso.byKey[k]
		out = append(out, &c)
	}
	return out
}

// Close implements engine.Worktrees: it commits what changed (author
// acpflow; a message naming the workflow, run and steps), counts the
// files the branch changes against its base, and applies keep.
func (iso *isolation) Close(ctx context.Context, wt *engine.Worktree, is *engine.Isolation, steps []string) error {
	gw := worktree.Worktree{Path: wt.Path, Branch: wt.Branch, Base: wt.Base, BaseCommit: wt.BaseCommit}
	commit, _, err := iso.repo.Commit(ctx, gw, iso.message(wt, steps))
	if err != nil {
		return err
	}
	files, err := iso.repo.Changed(ctx, gw)
	if err != nil {
		return err
	}
	if commit == "" && len(files) > 0 {
		// Committed by an earlier attempt at the run (resume): the
		// branch's head is the commit, as the repository says it.
		if commit, err = iso.repo.BranchCommit(ctx, wt.Branch); err != nil {
			return fmt.Errorf("worktree %s: %w", wt.Path, err)
		}
	}
	wt.Commit, wt.Files, wt.FilesChanged = commit, files, len(files)
	changed := len(files) > 0
	keep := engine.KeepChanged
	if is != nil {
		keep = is.Keep
	}
	switch {
	case keep == engine.KeepAlways || keep == engine.KeepChanged && changed:
		wt.Kept = engine.KeptWorktree
	case keep == engine.KeepNever && changed:
		wt.Kept = engine.KeptBranch
	default:
		wt.Kept = engine.KeptNothing
		wt.Commit = ""
	}
	if wt.Kept != engine.KeptWorktree {
		if err := iso.repo.Remove(ctx, gw, wt.Kept == engine.KeptNothing); err != nil {
			return err
		}
		os.Remove(markPath(wt.Path))
	} else {
		// The mark stays with the worktree, its owner now gone: a
		// finished run's, which `acpflow worktrees --prune` may judge.
		iso.mark(wt)
	}
	iso.keep(ctx, wt)
	return nil
}

// message is the commit message of wt's changes: a subject naming the
// workflow and run, and the steps that ran in it.
func (iso *isolation) message(wt *engine.Worktree, steps []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "acpflow: %s run %s", iso.workflow, iso.runID)
	if wt.Step != "" {
		fmt.Fprintf(&b, " step %s", wt.Step)
		if wt.Index != nil {
			fmt.Fprintf(&b, " item %d", *wt.Index)
		}
	}
	b.WriteString("\n\n")
	fmt.Fprintf(&b, "Workflow: %s\n", iso.workflow)
	if iso.file != "" {
		fmt.Fprintf(&b, "Workflow-File: %s\n", iso.file)
	}
	fmt.Fprintf(&b, "Run: %s\n", iso.runID)
	if len(steps) > 0 {
		fmt.Fprintf(&b, "Steps: %s\n", strings.Join(steps, ", "))
	}
	fmt.Fprintf(&b, "Base: %s (%s)\n", wt.Base, wt.BaseCommit)
	return b.String()
}

// mark is what acpflow writes beside each worktree it makes
// (PATH.json): which process uses it, and enough to remove it without
// the run store, for a crash that left no record.
type mark struct {
	RunID      string    `json:"run_id"`
	Repo       string    `json:"repo"`
	Branch     string    `json:"branch"`
	BaseCommit string    `json:"base_commit,omitempty"`
	PID        int       `json:"pid"`
	StartTicks uint64    `json:"start_ticks"`
	Created    time.Time `json:"created"`
}

func markPath(worktreePath string) string { return worktreePath + ".json" }

// mark writes wt's mark, this process its owner.
func (iso *isolation) mark(wt *engine.Worktree) error {
	o := CurrentOwner()
	m := mark{RunID: iso.runID, Repo: iso.repo.Root, Branch: wt.Branch, BaseCommit: wt.BaseCommit, PID: o.PID, StartTicks: o.StartTicks, Created: time.Now().UTC()}
	var was mark
	if b, err := os.ReadFile(markPath(wt.Path)); err == nil && json.Unmarshal(b, &was) == nil && !was.Created.IsZero() {
		m.Created = was.Created
	}
	b, _ := json.Marshal(m)
	if err := os.WriteFile(markPath(wt.Path), b, 0o644); err != nil {
		return fmt.Errorf("worktree %s: %w", wt.Path, err)
	}
	return nil
}
