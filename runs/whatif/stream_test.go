package whatif_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/internal/transcript"
	"github.com/acpflow/acpflow/internal/transcript/transcripttest"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs/whatif"
)

// fileOf writes run as a transcript file and opens it.
func fileOf(t testing.TB, run *whatif.Run) *transcript.Reader {
	t.Helper()
	r, err := transcript.Open(writeRun(t, run))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// writeRun writes run as a transcript file.
func writeRun(t testing.TB, run *whatif.Run) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "run.json")
	fh, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := (&transcript.File{RunID: run.ID, Workflow: run.Workflow, Steps: run.Steps}).Write(fh); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	return p
}

// TestAFileReadAStepAtATimeIsDecidedAsInMemory: the class of input is
// where a step's permission records sit in a file: on its first attempt
// (as exported), on its last, split over both, and steps that come back
// after another. Read a step attempt at a time (FromReader), every request
// finds the same record, and is decided the same, as with the whole file
// read at once (ReadFile).
func TestAFileReadAStepAtATimeIsDecidedAsInMemory(t *testing.T) {
	pol := &whatif.Policies{Permission: rules(t, "reject", [2]string{`tool.title == "make"`, "allow"}), Source: policies.SourceWorkflow}
	attempt := func(step string, n int, answer string, recs ...*policies.PermissionRecord) transcript.Step {
		s := turn(step, "/ws", []call{{id: "call_1", kind: "execute", title: "ls", answer: answer}, {id: "call_2", kind: "execute", title: "make", answer: "allow-once"}})
		s.Attempt = n
		for _, r := range recs {
			s.Permissions = append(s.Permissions, *r)
		}
		return s
	}
	rejected, allowed := record("call_1", "reject", "reject-once", "default"), record("call_1", "allow", "allow-once", "7")
	made := record("call_2", "allow", "allow-once", "1")
	for _, c := range []struct {
		name  string
		steps []transcript.Step
	}{
		{"records on the first attempt", []transcript.Step{attempt("s", 1, "reject-once", rejected, allowed, made, made), attempt("s", 2, "allow-once")}},
		{"records on the last attempt", []transcript.Step{attempt("s", 1, "reject-once"), attempt("s", 2, "allow-once", rejected, allowed, made, made)}},
		{"records split over the attempts", []transcript.Step{attempt("s", 1, "reject-once", allowed, made), attempt("s", 2, "allow-once", rejected, made)}},
		{"a step that comes back after another", []transcript.Step{attempt("s", 1, "reject-once", rejected), attempt("o", 1, "allow-once", allowed, made), attempt("s", 2, "allow-once", allowed, made, made)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			run := &whatif.Run{ID: "run-1", Workflow: "wf", Steps: c.steps}
			whole, err := transcript.ReadFile(writeRun(t, run))
			if err != nil {
				t.Fatal(err)
			}
			want, wantTot := testRun(t, pol, whatif.FromFile(whole))
			got, gotTot := testRun(t, pol, whatif.FromReader(fileOf(t, run)))
			wj, _ := json.Marshal(want)
			gj, _ := json.Marshal(got)
			if !bytes.Equal(wj, gj) || !equalTotals(gotTot, wantTot) {
				t.Errorf("from the file:\n%s\n%+v\nin memory:\n%s\n%+v", gj, gotTot, wj, wantTot)
			}
			for _, r := range got {
				if r.Old == nil || r.Old.From != whatif.FromRecord {
					t.Errorf("%s attempt %d %s: no record found: %+v", r.Step, r.Attempt, r.ToolCallID, r.Old)
				}
			}
		})
	}
}

// TestAFileThatCannotBeReadIsReportedBeforeAnyDecision: the class of input
// is a file that goes wrong after good attempts (a broken attempt, a file
// cut short, another format named after the steps): Test says the run is
// unreadable (*UnreadableError) before it reports any decision, so that
// `policy test` never prints half a verdict.
func TestAFileThatCannotBeReadIsReportedBeforeAnyDecision(t *testing.T) {
	good := turn("s", "/ws", []call{{id: "c1", kind: "execute", title: "ls", answer: "allow-once", record: record("c1", "allow", "allow-once", "1")}})
	b, _ := json.Marshal(good)
	head := `{"format": "` + transcript.Format + `", "run_id": "r", "steps": [` + string(b) + `, `
	for _, c := range []struct{ name, body, want string }{
		{"a broken attempt after a good one", head + `{"step": 7}]}`, "cannot unmarshal number"},
		{"a file cut short after a good attempt", head + `{"step": "s", "messages": [`, "the file ends inside it"},
		{"another format after the steps", `{"steps": [` + string(b) + `], "format": "other/2"}`, `format "other/2"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "bad.json")
			os.WriteFile(p, []byte(c.body), 0o600)
			r, err := transcript.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			reported := 0
			count := func(*whatif.Result) error { reported++; return nil }
			err = whatif.New(&whatif.Policies{Permission: rules(t, "allow")}).Test(context.Background(), whatif.FromReader(r), whatif.Report{Request: count})
			var ue *whatif.UnreadableError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
				t.Errorf("error %v, want an UnreadableError naming %s and saying %q", err, p, c.want)
			}
			if reported != 0 {
				t.Errorf("%d decisions reported before the error", reported)
			}
		})
	}
}

// TestALargeFileIsTestedOneAttemptAtATime: the class of input is a
// transcript file far larger than its attempts (48 of 1 MiB). The live
// heap, measured after a collection as each decision is reported, stays
// under a bound set by one attempt, not by the file, and every request
// finds its record on the first attempt.
func TestALargeFileIsTestedOneAttemptAtATime(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 48 MiB file")
	}
	p := filepath.Join(t.TempDir(), "large.json")
	fh, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := transcripttest.Large(fh, "/ws", 48, 1<<20); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	r, err := transcript.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapAlloc, uint64(0)
	w := whatif.New(&whatif.Policies{Permission: rules(t, "allow"), Source: policies.SourceWorkflow})
	err = w.Test(context.Background(), whatif.FromReader(r), whatif.Report{Request: func(res *whatif.Result) error {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		if ms.HeapAlloc > base && ms.HeapAlloc-base > peak {
			peak = ms.HeapAlloc - base
		}
		if res.Old == nil || res.Old.From != whatif.FromRecord || res.Changed {
			t.Errorf("%s attempt %d: old %+v, changed %v; want its record, unchanged", res.ToolCallID, res.Attempt, res.Old, res.Changed)
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if tot := w.Totals(); tot.Requests != 48 || tot.Unchanged != 48 || tot.Transcripts != 48 {
		t.Errorf("totals %+v, want 48 requests, unchanged", tot)
	}
	if peak > 16<<20 {
		t.Errorf("the live heap grew by %d MiB while testing a 48 MiB file; want under 16 MiB", peak>>20)
	}
}

// FuzzTest: whatever a transcript file holds, reading it and deciding its
// requests again never panics.
func FuzzTest(f *testing.F) {
	for _, s := range []transcript.Step{
		turn("s", "/ws", []call{{id: "c1", kind: "execute", title: "rm -rf x", rawInput: map[string]any{"command": []any{"bash", "-lc", "rm x"}}, answer: "allow-once", record: record("c1", "allow", "allow-once", "1")}}),
		turn("s", "", []call{{id: "c2", kind: "edit", title: "a", locations: []string{"../a", "/etc/x"}, answer: "!"}, {id: "c2", kind: "read", answer: ""}}),
	} {
		var b bytes.Buffer
		(&transcript.File{RunID: "r", Steps: []transcript.Step{s}}).Write(&b)
		f.Add(b.Bytes())
	}
	pol := &whatif.Policies{Permission: policies.DefaultPermission(), Source: policies.SourceDefault, Env: policies.DefaultEnv()}
	f.Fuzz(func(t *testing.T, data []byte) {
		run := &whatif.Run{ID: "r"}
		if _, err := transcript.Decode(bytes.NewReader(data), func(s *transcript.Step, _ int64) error {
			run.Steps = append(run.Steps, *s)
			return nil
		}); err != nil {
			return
		}
		whatif.New(pol).Test(context.Background(), run, whatif.Report{})
	})
}
