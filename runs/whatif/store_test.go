package whatif_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/internal/transcript"
	"github.com/acpflow/acpflow/runs/store"
	"github.com/acpflow/acpflow/runs/whatif"
)

func TestParseSelection(t *testing.T) {
	for _, c := range []struct {
		name, filter string
		want         whatif.Selection
		err          string
	}{
		{"all is every run", "all", whatif.Selection{}, ""},
		{"a word without = is a run or batch id", "20261201T100806-61f3", whatif.Selection{ID: "20261201T100806-61f3"}, ""},
		{"the keys of acpflow runs combine", "workflow=review,status=failed,batch=b1,limit=10",
			whatif.Selection{Filter: store.Filter{Workflow: "review", Status: engine.StatusFailed, Batch: "b1", Limit: 10}}, ""},
		{"an unknown key is suggested", "wrkflow=x", whatif.Selection{}, `did you mean "workflow"`},
		{"an unknown status is named", "status=done", whatif.Selection{}, `status "done"`},
		{"a limit is a positive number", "limit=0", whatif.Selection{}, `limit "0"`},
		{"a key needs a value", "workflow=", whatif.Selection{}, "want KEY=VALUE"},
		{"nothing is an error", "", whatif.Selection{}, "want all"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := whatif.ParseSelection(c.filter)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Errorf("= %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

// fakeStore is a run store holding one batch of runs.
type fakeStore struct {
	runs        []store.Run
	details     map[string]*store.RunDetail
	transcripts map[string][]transcript.Step
}

func (f *fakeStore) ListRuns(_ context.Context, fl store.Filter) ([]store.Run, error) {
	var out []store.Run
	for _, r := range f.runs {
		if fl.Workflow == "" || fl.Workflow == r.Workflow {
			out = append(out, r)
		}
	}
	return out, nil
}

func (f *fakeStore) RunsOfBatch(_ context.Context, id string) ([]store.Run, error) {
	var out []store.Run
	for _, r := range f.runs {
		if r.BatchID == id {
			out = append(out, r)
		}
	}
	return out, nil
}

func (f *fakeStore) ResolveID(_ context.Context, id string) (string, string, error) {
	for _, r := range f.runs {
		if strings.HasPrefix(r.ID, id) {
			return r.ID, store.KindRun, nil
		}
		if r.BatchID == id {
			return id, store.KindBatch, nil
		}
	}
	return "", "", store.ErrNotFound
}

func (f *fakeStore) GetRun(_ context.Context, id string) (*store.RunDetail, error) {
	if d, ok := f.details[id]; ok {
		return d, nil
	}
	return nil, store.ErrNotFound
}

func (f *fakeStore) Transcripts(_ context.Context, id string) ([]transcript.Step, error) {
	return f.transcripts[id], nil
}

func TestRecordedRunsAreReadWithTheirStepsRecords(t *testing.T) {
	ws := t.TempDir()
	mk := func(id, batch string) store.Run {
		return store.Run{ID: id, BatchID: batch, Workflow: "review", Workspace: ws}
	}
	f := &fakeStore{
		runs:        []store.Run{mk("run-a", "b1"), mk("run-b", "b1"), {ID: "run-c", Workflow: "other"}},
		details:     map[string]*store.RunDetail{},
		transcripts: map[string][]transcript.Step{},
	}
	for _, r := range f.runs {
		f.details[r.ID] = &store.RunDetail{Run: r, Steps: []store.Step{{StepID: "work", Permissions: []store.Permission{
			{ToolCallID: "c1", Decision: "reject", Outcome: "selected", OptionID: "reject-once", Policy: "workflow", Rule: "2"},
		}}}}
		// The transcripts come without records; the cwd is a directory
		// of the workspace, which the run store knows.
		f.transcripts[r.ID] = []transcript.Step{turn("work", ws+"/sub", []call{
			{id: "c1", kind: "execute", title: "ls", answer: "reject-once"},
			{id: "c2", kind: "edit", title: "top.go", locations: []string{ws + "/top.go"}, answer: "allow-once"},
		})}
	}
	for _, c := range []struct {
		filter string
		want   []string
	}{
		{"all", []string{"run-a", "run-b", "run-c"}},
		{"workflow=review", []string{"run-a", "run-b"}},
		{"b1", []string{"run-a", "run-b"}},
		{"run-c", []string{"run-c"}},
	} {
		t.Run("--runs "+c.filter, func(t *testing.T) {
			sel, err := whatif.ParseSelection(c.filter)
			if err != nil {
				t.Fatal(err)
			}
			list, err := sel.Runs(context.Background(), f)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, r := range list {
				ids = append(ids, r.ID)
			}
			if strings.Join(ids, " ") != strings.Join(c.want, " ") {
				t.Errorf("runs = %v, want %v", ids, c.want)
			}
		})
	}
	t.Run("a run's records are matched to its requests", func(t *testing.T) {
		run, err := whatif.LoadRun(context.Background(), f, f.runs[0])
		if err != nil {
			t.Fatal(err)
		}
		if run.Workspace != ws {
			t.Errorf("workspace = %q, want the run's %q", run.Workspace, ws)
		}
		got, _ := testRun(t, &whatif.Policies{Permission: rules(t, "reject",
			[2]string{`tool.kind == "edit" && all(tool.locations, .in_workspace)`, "allow"})}, run)
		if len(got) != 2 || got[0].Old == nil || got[0].Old.From != whatif.FromRecord || got[0].Old.Rule != "2" {
			t.Fatalf("results = %+v", got)
		}
		if got[1].New.Decision != "allow" || got[1].Changed {
			t.Errorf("a file of the run's workspace outside the cwd: %+v", got[1].New)
		}
	})
	t.Run("an unknown id is an error", func(t *testing.T) {
		if _, err := (whatif.Selection{ID: "nope"}).Runs(context.Background(), f); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("err = %v", err)
		}
	})
}
