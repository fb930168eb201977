package replayagent_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/acpflow/acpflow/internal/replayagent"
	"github.com/acpflow/acpflow/internal/transcript"
)

// TestSource: the classes of input are a transcript file (FILE, FILE/STEP,
// relative or absolute), what is no file (a run id), and a path to what is
// not a regular file (a directory, a named pipe, a device, and those
// before /STEP), which is refused saying what it is.
func TestSource(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "run.json")
	if err := os.WriteFile(file, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
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
		{"a directory is not a file", dir, "", "", "from: " + dir + ": not a transcript file: a directory"},
		{"a missing file in a directory is not one", dir + "/gone.json", "", "", "from: " + dir + "/gone.json: no such transcript file (a run id is resolved by acpflow run)"},
		{"a named pipe is not a file", fifo, "", "", "from: " + fifo + ": not a transcript file: a named pipe"},
		{"a named pipe and /STEP", fifo + "/s", "", "", "from: " + fifo + "/s: not a transcript file: " + fifo + " is a named pipe"},
		{"/dev/zero is not a file", "/dev/zero", "", "", "from: /dev/zero: not a transcript file: a character device"},
		{"/dev/zero and /STEP", "/dev/zero/s", "", "", "from: /dev/zero/s: not a transcript file: /dev/zero is a character device"},
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

// TestIsPath: the class of input is a from: that can only be a path
// (absolute, ./ or ../, or naming something that is not a regular file),
// which acpflow run never looks up as a run id, against run ids.
func TestIsPath(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	os.Mkdir("sub", 0o755)
	for from, want := range map[string]bool{
		"/dev/zero": true, "/nonexistent/x.json": true, "./x.json": true, "../x.json": true, "sub": true,
		"20261201T093000-abcd": false, "20261201T093000-abcd/review": false, "fixtures/missing.json": false,
	} {
		if got := replayagent.IsPath(from); got != want {
			t.Errorf("IsPath(%q) = %v, want %v", from, got, want)
		}
	}
}

// TestLoadRefusesWhatIsNotATranscriptFile: the class of input is a FILE
// given to `acpflow agent replay` that is no transcript: a named pipe with
// no writer (refused at once, never waited on), /dev/zero (never read
// whole), a file cut short. Each is an error naming it.
func TestLoadRefusesWhatIsNotATranscriptFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "cut.json")
	os.WriteFile(cut, []byte(`{"format": "acpflow-transcript/1", "steps": [{"step": "a", "messages": [`), 0o600)
	for _, c := range []struct{ file, want string }{
		{fifo, fifo + ": not a transcript file: not a regular file (a named pipe)"},
		{"/dev/zero", "/dev/zero: not a transcript file: not a regular file (a character device)"},
		{cut, cut + ": not a transcript file: the step attempt at byte 45: the file ends inside it"},
	} {
		done := make(chan error, 1)
		go func() { _, err := replayagent.Load(c.file, "a"); done <- err }()
		select {
		case err := <-done:
			if err == nil || err.Error() != c.want {
				t.Errorf("Load(%s) = %v, want %q", c.file, err, c.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Load(%s) blocked", c.file)
		}
	}
}
