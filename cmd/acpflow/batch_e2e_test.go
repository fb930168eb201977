package main

// End-to-end tests of batches and resume: ownership claimed in the store,
// memory that does not grow with the number of runs, bad lines that fail
// alone, inputs that never end.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	agentrecord "github.com/acpflow/acpflow/internal/testagent/record"
	"github.com/acpflow/acpflow/runs"
)

// started is an acpflow process started in the background.
type started struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
}

func startAcpflow(t *testing.T, dir string, args ...string) *started {
	t.Helper()
	s := &started{cmd: exec.Command(acpflowBin, args...)}
	s.cmd.Dir = dir
	s.cmd.Env = append(os.Environ(), "NO_COLOR=1")
	s.cmd.Stdout, s.cmd.Stderr = &s.stdout, &s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			s.cmd.Process.Kill()
			s.cmd.Wait()
		}
		assertNoProcessFrom(t, binDir)
	})
	return s
}

func (s *started) wait(t *testing.T) result {
	t.Helper()
	err := s.cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return result{s.cmd.ProcessState.ExitCode(), s.stdout.String(), s.stderr.String()}
}

func prompts(t *testing.T, record string) map[string]int {
	out := map[string]int{}
	for _, rec := range readRecords(t, record) {
		if rec["event"] == "prompt" {
			out[agentrecord.PromptText(rec)]++
		}
	}
	return out
}

func TestOfResumesOfOneRunStartedAtOnceExactlyOneRunsIt(t *testing.T) {
	const rounds, resumers = 4, 3
	for round := range rounds {
		dir := t.TempDir()
		record := filepath.Join(dir, "record.jsonl")
		state := filepath.Join(dir, "state.db")
		out := filepath.Join(dir, "out.jsonl")
		// The step fails the first time (its cwd does not exist yet), and
		// takes a second to answer when resumed.
		wf := writeWorkflow(t, dir, fmt.Sprintf(`name: once
agents:
  slow: {command: %s, args: %s}
steps:
  - {id: slow, uses: acp-subagent, with: {agent: slow, prompt: "slow", cwd: later}}
`, testAgent, agentArgs("-record", record, "-prompt-delay", "1s")))
		if r := acpflow(t, dir, "run", wf, "--state", state, "--output", out, "--workspace", dir); r.code != 1 {
			t.Fatalf("first run: exit %d\n%s", r.code, r.stderr)
		}
		var first struct {
			RunID string `json:"run_id"`
		}
		json.Unmarshal([]byte(readFile(t, out)), &first)
		os.Mkdir(filepath.Join(dir, "later"), 0o755)

		var procs []*started
		for range resumers {
			procs = append(procs, startAcpflow(t, dir, "resume", first.RunID, "--state", state))
		}
		pids := map[string]bool{}
		for _, p := range procs {
			pids[fmt.Sprint(p.cmd.Process.Pid)] = true
		}
		won := 0
		for _, p := range procs {
			r := p.wait(t)
			switch {
			case r.code == 0 && strings.Contains(r.stdout, "already succeeded: nothing to resume"):
				// A resume a loaded machine started only after the winner
				// had ended: it lost the race without a refusal.
			case r.code == 0:
				won++
			case r.code == 2 && strings.Contains(r.stderr, "run "+first.RunID+" is still running (acpflow process "):
				var pid int
				fmt.Sscanf(r.stderr[strings.Index(r.stderr, "acpflow process ")+len("acpflow process "):], "%d", &pid)
				if owner := fmt.Sprint(pid); !pids[owner] || owner == fmt.Sprint(p.cmd.Process.Pid) {
					t.Errorf("round %d: the refusal names process %d, not another resume: %s", round, pid, r.stderr)
				}
			default:
				t.Errorf("round %d: resume exit %d\n%s", round, r.code, r.stderr)
			}
		}
		if n := prompts(t, record)["slow"]; won != 1 || n != 1 {
			t.Fatalf("round %d: %d of %d resumes succeeded and the step ran %d times; want exactly one of each", round, won, resumers, n)
		}
		assertAgentsGone(t, record)
	}
}

func TestResumeOfABatchStillRunningIsRefused(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.jsonl")
	state := filepath.Join(dir, "state.db")
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: live
inputs:
  n: {type: number, required: true}
agents:
  a: {command: %s, args: %s}
steps:
  - {id: one, uses: acp-subagent, with: {agent: a, prompt: "line ${{ inputs.n }}"}}
`, testAgent, agentArgs("-record", record, "-prompt-delay", "300ms")))
	const lines = 8
	var in strings.Builder
	for i := range lines {
		fmt.Fprintf(&in, "{\"n\": %d}\n", i)
	}
	// The lines come on stdin, which stays open until the resume has been
	// refused: the batch is still running then by construction, not
	// because its lines outlast the resume on a loaded machine.
	stdin, feed, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer feed.Close()
	batch := &started{cmd: exec.Command(acpflowBin, "run", wf, "--inputs", "-", "--concurrency", "1", "--state", state)}
	batch.cmd.Dir = dir
	batch.cmd.Env = append(os.Environ(), "NO_COLOR=1")
	batch.cmd.Stdin, batch.cmd.Stdout, batch.cmd.Stderr = stdin, &batch.stdout, &batch.stderr
	if err := batch.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	t.Cleanup(func() {
		if batch.cmd.ProcessState == nil {
			batch.cmd.Process.Kill()
			batch.cmd.Wait()
		}
		assertNoProcessFrom(t, binDir)
	})
	io.WriteString(feed, in.String())
	var batchID string
	for deadline := time.Now().Add(time.Minute); batchID == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		r := acpflow(t, dir, "runs", "--json", "--state", state)
		var run struct {
			BatchID string `json:"batch_id"`
		}
		json.Unmarshal([]byte(strings.SplitN(r.stdout, "\n", 2)[0]), &run)
		batchID = run.BatchID
	}
	if batchID == "" {
		t.Fatal("the batch never recorded a run")
	}
	r := acpflow(t, dir, "resume", batchID, "--state", state)
	want := fmt.Sprintf("batch %s is still running (acpflow process %d)", batchID, batch.cmd.Process.Pid)
	if r.code != 2 || !strings.Contains(r.stderr, want) {
		t.Errorf("resume of a live batch: exit %d, want 2 and %q\n%s\n%s", r.code, want, r.stdout, r.stderr)
	}
	feed.Close() // the inputs end: the batch runs its last lines and ends
	if b := batch.wait(t); b.code != 0 {
		t.Fatalf("the batch: exit %d\n%s", b.code, b.stderr)
	}
	got := prompts(t, record)
	for i := range lines {
		if n := got[fmt.Sprintf("line %d", i)]; n != 1 {
			t.Errorf("line %d ran %d times", i, n)
		}
	}
	if len(got) != lines {
		t.Errorf("%d prompts for %d lines: %v", len(got), lines, got)
	}
	if r := acpflow(t, dir, "resume", batchID, "--state", state); r.code != 0 || !strings.Contains(r.stdout, "nothing to resume") {
		t.Errorf("resume of the ended batch: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	assertAgentsGone(t, record)
}

// badLines is an inputs file with a line of every kind that is not an
// object of valid inputs, between good ones (whose n is their line number);
// want is, per line number, a fragment of its error ("" for a good line).
func badLines() (data string, want map[int]string) {
	lines := []string{
		`{"n": 1}`,
		`{"n": 2, "doc": "` + strings.Repeat("y", runs.MaxLine) + `"}`,
		`{"n": 3`,
		`["n", 4]`,
		"{\"n\": 5, \"doc\": \"\xfe\"}",
		`{"n": "six"}`,
		`{"doc": "no n"}`,
		``,
		`{"n": 9}`,
	}
	want = map[int]string{1: "", 2: "longer than 16 MiB", 3: "not a JSON object", 4: "an array",
		5: "not valid UTF-8", 6: "n", 7: "n", 9: ""}
	return strings.Join(lines, "\n") + "\n", want
}

func TestABadBatchLineFailsAloneWithItsLineNumberFromAFileAndFromStdin(t *testing.T) {
	for _, from := range []string{"file", "stdin"} {
		t.Run(from, func(t *testing.T) {
			dir := t.TempDir()
			state := filepath.Join(dir, "state.db")
			out := filepath.Join(dir, "out.jsonl")
			wf := writeWorkflow(t, dir, `name: lines
inputs:
  n: {type: number, required: true}
  doc: {type: string, default: ""}
agents:
  demo: {builtin: demo}
steps:
  - {id: one, uses: acp-subagent, with: {agent: demo, prompt: "line ${{ inputs.n }}"}}
`)
			data, want := badLines()
			inputs := filepath.Join(dir, "in.jsonl")
			os.WriteFile(inputs, []byte(data), 0o644)
			name := inputs
			cmd := exec.Command(acpflowBin, "run", wf, "--inputs", inputs, "--state", state, "--output", out)
			if from == "stdin" {
				name = "-"
				cmd = exec.Command(acpflowBin, "run", wf, "--inputs", "-", "--state", state, "--output", out)
				cmd.Stdin = io.MultiReader(strings.NewReader(data)) // a pipe, not the file
			}
			cmd.Dir = dir
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			t.Cleanup(func() { assertNoProcessFrom(t, binDir) })
			err := cmd.Run()
			if code := cmd.ProcessState.ExitCode(); code != 1 {
				t.Fatalf("exit %d (%v), want 1\n%s", code, err, stderr.String())
			}
			check := func(results string, lines map[int]string) {
				t.Helper()
				got := map[int]bool{}
				for _, line := range strings.Split(strings.TrimSpace(results), "\n") {
					var res struct {
						Status string         `json:"status"`
						Error  string         `json:"error"`
						Inputs map[string]any `json:"inputs"`
					}
					if err := json.Unmarshal([]byte(line), &res); err != nil {
						t.Fatalf("result %q: %v", line, err)
					}
					n := 0
					if res.Status == "succeeded" {
						n = int(res.Inputs["n"].(float64))
					} else if _, err := fmt.Sscanf(strings.TrimPrefix(res.Error, name+":"), "%d:", &n); err != nil {
						t.Errorf("a failed result names no line: %q", res.Error)
						continue
					}
					frag, ok := lines[n]
					switch {
					case !ok || got[n]:
						t.Errorf("an unexpected or second result for line %d: %s", n, res.Error)
					case frag == "" && res.Status != "succeeded":
						t.Errorf("good line %d: %s %s", n, res.Status, res.Error)
					case frag != "" && (res.Status != "failed" || !strings.HasPrefix(res.Error, fmt.Sprintf("%s:%d: ", name, n)) || !strings.Contains(res.Error, frag)):
						t.Errorf("bad line %d: %s %q, want failed %s:%d: …%s…", n, res.Status, res.Error, name, n, frag)
					}
					got[n] = true
				}
				for n := range lines {
					if !got[n] {
						t.Errorf("line %d has no result", n)
					}
				}
			}
			check(readFile(t, out), want)

			// Resume fails the bad lines again, and runs none of them with
			// default inputs; the good ones are not run again.
			r := acpflow(t, dir, "runs", "--json", "--limit", "1", "--state", state)
			var run struct {
				BatchID string `json:"batch_id"`
			}
			json.Unmarshal([]byte(r.stdout), &run)
			os.Remove(out)
			if r := acpflow(t, dir, "resume", run.BatchID, "--state", state, "--output", out); r.code != 1 {
				t.Fatalf("resume: exit %d\n%s", r.code, r.stderr)
			}
			for n, frag := range want {
				if frag == "" {
					delete(want, n)
				}
			}
			check(readFile(t, out), want)
		})
	}
}

func TestInputsThatNeverEndGiveAClearErrorAtOnce(t *testing.T) {
	dir := t.TempDir()
	wf := writeWorkflow(t, dir, `name: never
inputs:
  n: {type: number, required: true}
agents:
  demo: {builtin: demo}
steps:
  - {id: one, uses: acp-subagent, with: {agent: demo, prompt: "${{ inputs.n }}"}}
`)
	// The error says the input was refused by its kind, before any read: a
	// read of /dev/zero would never end, so no time need be asserted.
	for _, c := range []struct{ inputs, want string }{
		{"/dev/zero", "/dev/zero is a character device"},
		{dir, "is a directory"},
	} {
		r := acpflow(t, dir, "run", wf, "--inputs", c.inputs, "--state", filepath.Join(dir, "state.db"))
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("--inputs %s: exit %d, want 2 and %q\n%s", c.inputs, r.code, c.want, r.stderr)
		}
	}
}

func TestAStdinBatchRunsEachLineAsItComes(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	wf := writeWorkflow(t, dir, `name: stream
inputs:
  n: {type: number, required: true}
agents:
  demo: {builtin: demo}
steps:
  - {id: one, uses: acp-subagent, with: {agent: demo, prompt: "${{ inputs.n }}"}}
`)
	cmd := exec.Command(acpflowBin, "run", wf, "--inputs", "-", "--state", filepath.Join(dir, "state.db"), "--output", out)
	cmd.Dir = dir
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		assertNoProcessFrom(t, binDir)
	})
	io.WriteString(stdin, "{\"n\": 1}\n")
	for deadline := time.Now().Add(time.Minute); countLines(out) < 1 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if countLines(out) != 1 {
		t.Fatal("the first line did not run before stdin ended")
	}
	io.WriteString(stdin, "{\"n\": 2}\n")
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("batch: %v", err)
	}
	if n := countLines(out); n != 2 {
		t.Errorf("%d results, want 2", n)
	}
}

// TestABatchsMemoryDoesNotGrowWithItsRuns runs batches of N and 4N runs on
// the demo agent, each run's inputs and outputs holding 100 KB, and
// compares the peak RSS of acpflow (with its agents): a batch that kept
// its results would need ~4 times the memory for 4 times the runs.
func TestABatchsMemoryDoesNotGrowWithItsRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 750 demo runs")
	}
	const n = 150
	dir := t.TempDir()
	wf := writeWorkflow(t, dir, `name: mem
inputs:
  doc: {type: string, required: true}
agents:
  demo: {builtin: demo}
steps:
  - {id: echo, uses: acp-subagent, with: {agent: demo, prompt: "${{ inputs.doc }}"}}
outputs:
  doc: ${{ inputs.doc }}
`)
	peak := func(runs int) int64 {
		inputs := filepath.Join(dir, fmt.Sprintf("in%d.jsonl", runs))
		f, _ := os.Create(inputs)
		doc := strings.Repeat("x", 100_000)
		for i := range runs {
			fmt.Fprintf(f, "{\"doc\": \"%d %s\"}\n", i, doc)
		}
		f.Close()
		out := filepath.Join(dir, fmt.Sprintf("out%d.jsonl", runs))
		r, rss := runMeasured(t, dir, nil, "run", wf, "--inputs", inputs, "--concurrency", "8",
			"--state", filepath.Join(dir, fmt.Sprintf("state%d.db", runs)), "--output", out)
		if r.code != 0 {
			t.Fatalf("%d runs: exit %d\n%s", runs, r.code, r.stderr)
		}
		assertNoProcessFrom(t, binDir)
		if got := countLines(out); got != runs {
			t.Fatalf("%d results for %d runs", got, runs)
		}
		return rss >> 10 // KiB
	}
	small, large := peak(n), peak(4*n)
	t.Logf("peak RSS: %d runs %d MiB, %d runs %d MiB", n, small>>10, 4*n, large>>10)
	if large >= 2*small {
		t.Errorf("peak RSS grew from %d MiB for %d runs to %d MiB for %d", small>>10, n, large>>10, 4*n)
	}
}

// An acpflow killed after recording a run's end but before writing its
// --output line leaves a run that resume will not run again: resume writes
// its line, as it was, and never a line twice.
func TestResumeWritesTheResultsThatAKilledAcpflowHadRecordedButNotWritten(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	out := filepath.Join(dir, "out.jsonl")
	wf := writeWorkflow(t, dir, `name: lost
inputs:
  n: {type: number, required: true}
agents:
  demo: {builtin: demo}
steps:
  - {id: one, uses: acp-subagent, with: {agent: demo, prompt: "first ${{ inputs.n }}"}}
  - {id: two, needs: [one], uses: acp-subagent, with: {agent: demo, prompt: "second ${{ inputs.n }}"}}
outputs:
  said: ${{ steps.two.final }}
`)
	inputs := filepath.Join(dir, "in.jsonl")
	os.WriteFile(inputs, []byte("{\"n\": 1}\n{\"n\": 2}\n{\"n\": 3}\n"), 0o644)
	t.Cleanup(func() { assertNoProcessFrom(t, binDir) })
	if r := acpflow(t, dir, "run", wf, "--inputs", inputs, "--state", state, "--output", out); r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	byInput := func() (map[float64]string, []string) {
		t.Helper()
		data, _ := os.ReadFile(out)
		lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		got := map[float64]string{}
		for _, line := range lines {
			var res struct {
				Inputs map[string]float64 `json:"inputs"`
			}
			if err := json.Unmarshal([]byte(line), &res); err != nil {
				t.Fatalf("a line that is not a result: %q", line)
			}
			if _, twice := got[res.Inputs["n"]]; twice {
				t.Errorf("input %v has two results", res.Inputs["n"])
			}
			got[res.Inputs["n"]] = line
		}
		return got, lines
	}
	was, lines := byInput()
	if len(was) != 3 {
		t.Fatalf("the batch wrote %d results, want 3", len(was))
	}
	// The line of input 2 was never written, and the file's last write
	// lost its newline.
	var kept []string
	for _, line := range lines {
		if line != was[2] {
			kept = append(kept, line)
		}
	}
	os.WriteFile(out, []byte(strings.Join(kept, "\n")), 0o644)

	var batchID string
	for _, line := range strings.Split(acpflow(t, dir, "runs", "--json", "--state", state).stdout, "\n") {
		var run struct {
			BatchID string `json:"batch_id"`
		}
		if json.Unmarshal([]byte(line), &run) == nil && run.BatchID != "" {
			batchID = run.BatchID
		}
	}
	for i := 0; i < 2; i++ {
		r := acpflow(t, dir, "resume", batchID, "--state", state, "--output", out)
		if r.code != 0 {
			t.Fatalf("resume: exit %d\n%s", r.code, r.stderr)
		}
		now, _ := byInput()
		if len(now) != 3 {
			t.Fatalf("after resume %d the file holds %d results, want 3", i+1, len(now))
		}
		var restored, had map[string]any
		json.Unmarshal([]byte(now[2]), &restored)
		json.Unmarshal([]byte(was[2]), &had)
		if !reflect.DeepEqual(restored, had) {
			t.Errorf("the restored line differs from the one that was lost:\n got %s\nwant %s", now[2], was[2])
		}
		wrote := strings.Contains(r.stderr, "the results of 1 runs that had ended")
		if wrote != (i == 0) {
			t.Errorf("resume %d: said it wrote a lost result: %v\n%s", i+1, wrote, r.stderr)
		}
	}

	// A lone run: the same.
	lone := filepath.Join(dir, "lone.jsonl")
	r := acpflow(t, dir, "run", wf, "--input", "n=7", "--state", state, "--output", lone, "--json")
	if r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	line, _ := os.ReadFile(lone)
	var res struct {
		RunID string `json:"run_id"`
	}
	json.Unmarshal(line, &res)
	os.WriteFile(lone, nil, 0o644)
	if r := acpflow(t, dir, "resume", res.RunID, "--state", state, "--output", lone); r.code != 0 || !strings.Contains(r.stdout, "already succeeded") {
		t.Fatalf("resume: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	again, _ := os.ReadFile(lone)
	var had, restored map[string]any
	json.Unmarshal(line, &had)
	json.Unmarshal(again, &restored)
	if !reflect.DeepEqual(restored, had) {
		t.Errorf("the lone run's restored line differs:\n got %s\nwant %s", again, line)
	}
}
