package engine

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
)

// Isolation is `isolation: worktree` with the `base:` and `keep:` beside
// it (docs/worktrees.md): the run (on the workflow), or each for-each
// element of a step (on the step), works in a git worktree of its own on
// a branch of its own.
type Isolation struct {
	// Base is the ref the branch starts from; the loader sets HEAD when
	// the file says nothing.
	Base string
	// Keep says which worktrees stay when their run (or element) ends:
	// KeepChanged, KeepAlways or KeepNever.
	Keep string
}

// The values of `keep:`.
const (
	KeepChanged = "changed" // keep the worktree and branch when something changed; remove both otherwise
	KeepAlways  = "always"  // keep both
	KeepNever   = "never"   // remove the worktree; keep the branch when it has a commit
)

// KeepValues are the values `keep:` takes, the default first.
var KeepValues = []string{KeepChanged, KeepAlways, KeepNever}

// What a Worktree's Kept says stayed when its run ended.
const (
	KeptWorktree = "worktree" // the worktree and its branch
	KeptBranch   = "branch"   // the branch alone (keep: never)
	KeptNothing  = "nothing"  // neither: nothing changed
)

// Worktree is one git worktree acpflow made for a run or a for-each
// element: the result's `worktree` (docs/results.md).
type Worktree struct {
	Path   string `json:"path"`
	Branch string `json:"branch"`
	// Base is the ref as the file names it; BaseCommit what it resolved to
	// when the worktree was made.
	Base       string `json:"base"`
	BaseCommit string `json:"base_commit,omitempty"`
	// Commit is the commit acpflow made of the changes when the run ended;
	// "" when nothing changed (or the run has not ended).
	Commit       string   `json:"commit"`
	FilesChanged int      `json:"files_changed"`
	Files        []string `json:"files,omitempty"`
	// Kept is what stayed once keep: was applied (KeptWorktree,
	// KeptBranch, KeptNothing); "" while the run is going.
	Kept string `json:"kept,omitempty"`
	// Step and Index say whose worktree it is when a step sets isolation:
	// the step, and the for-each element's index (nil: the step has no
	// for-each). Both empty: the run's own.
	Step  string `json:"step,omitempty"`
	Index *int   `json:"index,omitempty"`
}

// Key names the worktree within its run: "" for the run's own, STEP for a
// step's, STEP-INDEX for a for-each element's (the branch's tail).
func (w *Worktree) Key() string { return WorktreeKey(w.Step, w.Index) }

// WorktreeKey is the key of step's worktree (element index, nil for none);
// "" for the run's own.
func WorktreeKey(step string, index *int) string {
	switch {
	case step == "":
		return ""
	case index == nil:
		return step
	}
	return step + "-" + strconv.Itoa(*index)
}

// scopeValue is the worktree as expressions read it (run.worktree.*).
func (w *Worktree) scopeValue() map[string]any {
	files := make([]any, len(w.Files))
	for i, f := range w.Files {
		files[i] = f
	}
	return map[string]any{
		"path": w.Path, "branch": w.Branch, "base": w.Base, "commit": w.Commit,
		"files_changed": w.FilesChanged, "files": files,
	}
}

// Worktrees makes and ends the worktrees of a run (Options.Worktrees):
// package runs implements it over the user's git. The engine asks for a
// step's worktrees as their first attempts start, and ends every one,
// the run's last, once the run's agents are gone (nothing can write to
// them any more).
type Worktrees interface {
	// Open makes (or, for a run resumed, takes up again) the worktree of
	// step's element index (nil: a step without for-each), under the
	// step's isolation.
	Open(ctx context.Context, step string, index *int, iso *Isolation) (*Worktree, error)
	// Close commits what changed in wt, naming steps in the message, and
	// applies keep; it fills in wt's Commit, Files and Kept.
	Close(ctx context.Context, wt *Worktree, iso *Isolation, steps []string) error
}

// worktrees are a run's worktrees: its own (Options.Worktree) and its
// steps' (made as their first attempts start).
type worktrees struct {
	mu    sync.Mutex
	byKey map[string]*stepWorktree
}

type stepWorktree struct {
	once sync.Once
	wt   *Worktree
	err  error
}

// workspace is where an attempt of st (element el) works: its own
// worktree when the step sets isolation, else the run's worktree, else
// the run's workspace.
func (r *run) workspace(ctx context.Context, st *Step, el *Element) (string, error) {
	if st.Isolation == nil || r.opt.Worktrees == nil {
		if r.opt.Worktree != nil {
			return r.opt.Worktree.Path, nil
		}
		return r.opt.Workspace, nil
	}
	var index *int
	if el != nil {
		i := el.Index
		index = &i
	}
	key := WorktreeKey(st.ID, index)
	r.wts.mu.Lock()
	if r.wts.byKey == nil {
		r.wts.byKey = map[string]*stepWorktree{}
	}
	sw := r.wts.byKey[key]
	if sw == nil {
		sw = &stepWorktree{}
		r.wts.byKey[key] = sw
	}
	r.wts.mu.Unlock()
	sw.once.Do(func() {
		sw.wt, sw.err = r.opt.Worktrees.Open(ctx, st.ID, index, st.Isolation)
		if sw.err != nil {
			sw.err = fmt.Errorf("isolation: worktree: %w", sw.err)
		}
	})
	if sw.err != nil {
		return "", sw.err
	}
	return sw.wt.Path, nil
}

// closeWorktrees ends the steps' worktrees, then the run's, once every
// agent is gone: each is committed and kept as its keep: says, and goes
// into the result (a step's into its step's result). The first error
// fails the run.
func (r *run) closeWorktrees(ctx context.Context) error {
	if r.opt.Worktrees == nil {
		return nil
	}
	var errs []error
	r.wts.mu.Lock()
	keys := make([]string, 0, len(r.wts.byKey))
	for k, sw := range r.wts.byKey {
		if sw.wt != nil {
			keys = append(keys, k)
		}
	}
	r.wts.mu.Unlock()
	sort.Strings(keys)
	bySteps := map[string][]*Worktree{}
	for _, k := range keys {
		wt := r.wts.byKey[k].wt
		st := r.wf.Step(wt.Step)
		if err := r.opt.Worktrees.Close(ctx, wt, st.Isolation, []string{wt.Step}); err != nil {
			errs = append(errs, fmt.Errorf("step %s: worktree %s: %w", wt.Step, wt.Branch, err))
		}
		bySteps[wt.Step] = append(bySteps[wt.Step], wt)
	}
	for id, wts := range bySteps {
		sort.Slice(wts, func(i, j int) bool { return indexOf(wts[i]) < indexOf(wts[j]) })
		r.mu.Lock()
		res := r.res.Steps[id]
		if res == nil {
			res = r.results[id]
		}
		r.mu.Unlock()
		if res == nil {
			continue
		}
		if r.wf.Step(id).ForEach != nil {
			res.Worktrees = wts
		} else {
			res.Worktree = wts[0]
		}
		if r.opt.Recorder != nil {
			r.opt.Recorder.StepEnded(r.opt.RunID, id, r.ord(id), res)
		}
	}
	if wt := r.opt.Worktree; wt != nil {
		var ran []string
		for _, st := range r.wf.Steps {
			if res := r.res.Steps[st.ID]; res != nil && res.Attempts > 0 && st.Isolation == nil {
				ran = append(ran, st.ID)
			}
		}
		if err := r.opt.Worktrees.Close(ctx, wt, r.wf.Isolation, ran); err != nil {
			errs = append(errs, fmt.Errorf("worktree %s: %w", wt.Branch, err))
		}
		r.res.Worktree = wt
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

func indexOf(w *Worktree) int {
	if w.Index == nil {
		return -1
	}
	return *w.Index
}

// AllWorktrees lists the run's worktrees in res: the run's own first,
// then its steps', in the order of wf's steps.
func (res *RunResult) AllWorktrees(wf *Workflow) []*Worktree {
	var out []*Worktree
	if res.Worktree != nil {
		out = append(out, res.Worktree)
	}
	add := func(sr *StepResult) {
		if sr == nil {
			return
		}
		if sr.Worktree != nil {
			out = append(out, sr.Worktree)
		}
		out = append(out, sr.Worktrees...)
	}
	if wf != nil {
		for _, st := range wf.Steps {
			add(res.Steps[st.ID])
		}
		return out
	}
	ids := make([]string, 0, len(res.Steps))
	for id := range res.Steps {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		add(res.Steps[id])
	}
	return out
}
