package runs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/internal/replayagent"
	"github.com/acpflow/acpflow/runs/store"
)

// ResolveReplays turns every `builtin: replay` agent whose from: names a
// recorded run (RUN or RUN/STEP, a run id or a prefix of one) rather than a
// transcript file into one that plays a file: the run is exported from the
// store (Export) into a private directory that Close removes. It is done
// before anything starts, so a from: that names no run, a batch or a run
// without transcripts is an *InvalidError and nothing runs. An agent whose
// from: is a file is left alone (replayagent.Source reads it); one whose
// from: can only be a path (absolute, or naming a directory, a pipe, a
// device) is not looked up as a run: the error says what the path is.
func (r *Runner) ResolveReplays(ctx context.Context, wf *engine.Workflow) error {
	for _, a := range wf.Agents {
		if a.Builtin != replayagent.Name || a.From == "" {
			continue
		}
		if _, _, err := replayagent.Source(a.From, ""); err == nil {
			continue // a transcript file
		} else if replayagent.IsPath(a.From) {
			return invalid(fmt.Errorf("agent %s: %w", a.Name, err))
		}
		run, step, _ := strings.Cut(a.From, "/")
		file, err := r.exportReplay(ctx, run)
		if err != nil {
			return invalid(fmt.Errorf("agent %s: from: %s: %w", a.Name, a.From, err))
		}
		if step != "" {
			file += "/" + step
		}
		a.From = file
	}
	return nil
}

// exportReplay writes the transcripts of the run that ref names into the
// runner's private directory and returns the file's path; a run is
// exported once however many agents play it.
func (r *Runner) exportReplay(ctx context.Context, ref string) (string, error) {
	id, kind, err := r.Store.ResolveID(ctx, ref)
	if err != nil {
		return "", fmt.Errorf("not a transcript file, nor a recorded run: %w", err)
	}
	if kind == store.KindBatch {
		return "", fmt.Errorf("%s is a batch; name one of its runs (acpflow show %s lists them)", id, id)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.scratch == "" {
		if r.scratch, err = os.MkdirTemp("", "acpflow-replay-"); err != nil {
			return "", err
		}
	}
	path := filepath.Join(r.scratch, id+".transcript.json")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	f, err := Export(ctx, r.Store, id)
	if err != nil {
		return "", err
	}
	if len(f.Steps) == 0 {
		return "", fmt.Errorf("run %s has no transcript to play", id)
	}
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	if err := f.Write(fh); err != nil {
		fh.Close()
		return "", err
	}
	return path, fh.Close()
}

// Close removes what the runner wrote for its runs (the transcripts that
// replay agents play). Call it once the runs have ended.
func (r *Runner) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.scratch == "" {
		return nil
	}
	err := os.RemoveAll(r.scratch)
	r.scratch = ""
	return err
}
