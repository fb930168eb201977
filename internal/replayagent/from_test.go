package replayagent_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/acpflow/acpflow/internal/replayagent"
	"github.com/acpflow/acpflow/internal/transcript"
)

func TestSource(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "run.json")
	if err := os.WriteFile(file, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	for _, tc := range []struct {
		name, from         string
		wantFile, wantStep string
		wantErr            string
	}{
		{"a file plays the step of the same id", file, file, "current", ""},
		{"a relative file is made absolute, since the agent runs elsewhere", "run.json", file, "current", ""},
		{"a file and /STEP plays that step", file + "/other", file, "other", ""},
		{"a run id is not a file", "20261201-abcd/other", "", "", "from: 20261201-abcd/other: no such transcript file (a run id is resolved by acpflow run)"},
		{"a directory is not a file", dir, "", "", "from: " + dir + ": no such transcript file (a run id is resolved by acpflow run)"},
		{"a file and a slash alone is not a step", file + "/", "", "", "from: " + file + "/: no such transcript file (a run id is resolved by acpflow run)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, s, err := replayagent.Source(tc.from, "current")
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Errorf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || f != tc.wantFile || s != tc.wantStep {
				t.Errorf("Source = %q, %q, %v; want %q, %q", f, s, err, tc.wantFile, tc.wantStep)
			}
		})
	}
}

func TestLoadPicksTheLastAttemptOfTheStepOrElement(t *testing.T) {
	one, two := 1, 2
	f := &transcript.File{RunID: "r", Workflow: "w", Steps: []transcript.Step{
		{Step: "a", Attempt: 1, Agent: "first"},
		{Step: "a", Attempt: 2, Agent: "second"},
		{Step: "each", Index: &one, Attempt: 1, Agent: "element 1"},
		{Step: "each", Index: &two, Attempt: 1, Agent: "element 2"},
	}}
	path := filepath.Join(t.TempDir(), "t.json")
	fh, _ := os.Create(path)
	f.Write(fh)
	fh.Close()
	for _, tc := range []struct{ step, want, wantErr string }{
		{"a", "second", ""},
		{"each#2", "element 2", ""},
		{"each", "", path + ": the transcript has no step each"},
		{"each#3", "", path + ": the transcript has no step each (element 3)"},
		{"each#x", "", `step "each#x": the index after # must be a whole number from 0`},
		{"#1", "", `step "#1": want STEP or STEP#INDEX`},
	} {
		t.Run(tc.step, func(t *testing.T) {
			s, err := replayagent.Load(path, tc.step)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Errorf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || s.Agent != tc.want {
				t.Errorf("Load = %v, %v; want the attempt of %s", s, err, tc.want)
			}
		})
	}
}

func TestAnchor(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "fixtures"), 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "fixtures", "run.json")
	if err := os.WriteFile(file, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, from, want string }{
		{"a file next to the workflow is made absolute", "fixtures/run.json", file},
		{"so is a file next to the workflow with /STEP", "fixtures/run.json/review", file + "/review"},
		{"an absolute path stays", "/elsewhere/run.json", "/elsewhere/run.json"},
		{"a run id stays, for acpflow run", "20261201-abcd", "20261201-abcd"},
		{"a run id with /STEP stays", "20261201-abcd/review", "20261201-abcd/review"},
		{"a file not next to the workflow stays", "other/run.json", "other/run.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := replayagent.Anchor(dir, tc.from); got != tc.want {
				t.Errorf("Anchor(%q) = %q, want %q", tc.from, got, tc.want)
			}
		})
	}
}
