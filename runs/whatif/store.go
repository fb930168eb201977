package whatif

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/internal/suggest"
	"github.com/acpflow/acpflow/internal/transcript"
	"github.com/acpflow/acpflow/runs"
	"github.com/acpflow/acpflow/runs/store"
)

// Store is the part of the run store (runs/store.Store) that `policy
// test --runs` reads.
type Store interface {
	ListRuns(ctx context.Context, f store.Filter) ([]store.Run, error)
	RunsOfBatch(ctx context.Context, batchID string) ([]store.Run, error)
	ResolveID(ctx context.Context, idOrPrefix string) (id, kind string, err error)
	GetRun(ctx context.Context, id string) (*store.RunDetail, error)
	// Transcripts is a run's step attempts, in the order of its steps,
	// elements and attempts, without their permission records (those are
	// the steps').
	Transcripts(ctx context.Context, runID string) ([]transcript.Step, error)
}

// Selection is the runs `--runs FILTER` names: every run ("all"), the runs
// a filter selects (as `acpflow runs` filters them), or one run or batch by
// its id or a prefix of it.
type Selection struct {
	Filter store.Filter
	ID     string // a run or batch id (or prefix); when set, Filter is unused
}

var filterKeys = []string{"workflow", "status", "batch", "limit"}

var statuses = []string{
	string(engine.StatusRunning), string(engine.StatusSucceeded), string(engine.StatusFailed), string(engine.StatusCancelled),
}

// ParseSelection reads FILTER: `all`; KEY=VALUE pairs joined by commas,
// with the keys of `acpflow runs` (workflow=NAME|FILE, status=STATUS,
// batch=ID, limit=N: the newest N); or a run or batch id.
func ParseSelection(filter string) (Selection, error) {
	switch {
	case filter == "":
		return Selection{}, fmt.Errorf("want all, KEY=VALUE[,KEY=VALUE] (keys %s) or a run or batch id", strings.Join(filterKeys, ", "))
	case filter == "all":
		return Selection{}, nil
	case !strings.Contains(filter, "="):
		return Selection{ID: filter}, nil
	}
	var sel Selection
	for _, part := range strings.Split(filter, ",") {
		key, value, ok := strings.Cut(part, "=")
		key = strings.TrimSpace(key)
		if !ok || value == "" {
			return Selection{}, fmt.Errorf("%q: want KEY=VALUE", part)
		}
		switch key {
		case "workflow":
			sel.Filter.Workflow = value
		case "status":
			if !slices.Contains(statuses, value) {
				return Selection{}, fmt.Errorf("%s", suggest.Unknown("status", value, statuses))
			}
			sel.Filter.Status = engine.Status(value)
		case "batch":
			sel.Filter.Batch = value
		case "limit":
			n, err := strconv.Atoi(value)
			if err != nil || n < 1 {
				return Selection{}, fmt.Errorf("limit %q: want a positive number", value)
			}
			sel.Filter.Limit = n
		default:
			msg := fmt.Sprintf("unknown key %q: want %s", key, strings.Join(filterKeys, ", "))
			if s := suggest.Closest(key, filterKeys); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			}
			return Selection{}, fmt.Errorf("%s", msg)
		}
	}
	return sel, nil
}

// Runs lists the runs sel names, newest first (a batch's by input line).
func (sel Selection) Runs(ctx context.Context, s Store) ([]store.Run, error) {
	if sel.ID == "" {
		return s.ListRuns(ctx, sel.Filter)
	}
	id, kind, err := s.ResolveID(ctx, sel.ID)
	if err != nil {
		return nil, err
	}
	if kind == store.KindBatch {
		return s.RunsOfBatch(ctx, id)
	}
	d, err := s.GetRun(ctx, id)
	if err != nil {
		return nil, err
	}
	return []store.Run{d.Run}, nil
}

// LoadRun reads a recorded run's transcripts and its steps' permission
// records (runs.Export): what Tester.Test takes. A run whose records cannot
// be read (a corrupted transcript) is an *UnreadableError.
func LoadRun(ctx context.Context, s Store, r store.Run) (*Run, error) {
	f, err := runs.Export(ctx, s, r.ID)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &UnreadableError{RunID: r.ID, Err: err}
	}
	run := FromFile(f)
	run.Workspace = r.Workspace
	return run, nil
}
