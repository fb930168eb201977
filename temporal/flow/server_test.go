//go:build temporalserver

// The tests against a real Temporal server: opt-in (go test -tags
// temporalserver), because the server is built from go.temporal.io/server
// (../devserver), which takes minutes and gigabytes cold.
package flow

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/acpflow/acpflow/engine"
	agentrecord "github.com/acpflow/acpflow/internal/testagent/record"
	"github.com/acpflow/acpflow/policies"
)

var updateHistories = flag.Bool("update-histories", false, "record testdata/histories on the real server")

// server is a Temporal dev server built from ../devserver, on a free port.
type server struct{ addr string }

func startServer(t *testing.T) *server {
	t.Helper()
	bin := os.Getenv("ACPFLOW_TEMPORAL_DEVSERVER")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "devserver")
		b := exec.Command("go", "build", "-o", bin, ".")
		b.Dir = filepath.Join("..", "devserver")
		if out, err := b.CombinedOutput(); err != nil {
			t.Fatalf("building the dev server: %v\n%s", err, out)
		}
	}
	port := freePort(t)
	cmd := exec.Command(bin, "-port", strconv.Itoa(port))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	s := &server{addr: fmt.Sprintf("127.0.0.1:%d", port)}
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := client.Dial(client.Options{HostPort: s.addr})
		if err == nil {
			_, err = c.CheckHealth(context.Background(), &client.CheckHealthRequest{})
			c.Close()
			if err == nil {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dev server did not answer within a minute: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (s *server) client(t *testing.T) client.Client {
	c, err := client.Dial(client.Options{HostPort: s.addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestRecordHistories runs the fixtures on a real server with a worker in
// this process and, with -update-histories, keeps their histories for the
// replay test.
func TestRecordHistories(t *testing.T) {
	s := startServer(t)
	c := s.client(t)
	rec := filepath.Join(t.TempDir(), "record.jsonl")
	fixtures := map[string]string{
		"dag":     dagWorkflow,
		"retries": strings.ReplaceAll(retriesWorkflow, "REC", rec),
		"budget":  strings.NewReplacer("TESTAGENT", testAgent, "REC", rec).Replace(budgetWorkflow),
	}
	for name, src := range fixtures {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, src, nil)
			queue := "record-" + name
			w := worker.New(c, queue, worker.Options{})
			in := &Interpreter{Blobs: f.blobs}
			w.RegisterWorkflowWithOptions(in.Interpret, workflow.RegisterOptions{Name: WorkflowName})
			acts := &Activities{Blobs: f.blobs, Cache: filepath.Join(f.dir, "cache"), Ambient: policies.EnvMap(os.Environ())}
			w.RegisterActivityWithOptions(acts.Attempt, activity.RegisterOptions{Name: ActivityName})
			if err := w.Start(); err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			req := f.request(t, name)
			run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "history-" + name, TaskQueue: queue}, WorkflowName, req)
			if err != nil {
				t.Fatal(err)
			}
			var out Outcome
			if err := run.Get(context.Background(), &out); err != nil {
				t.Fatal(err)
			}
			res, err := out.Result(f.blobs, f.dir)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := comparable(res), comparable(f.onCLI(t)); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("on the server:\n%v\non the CLI:\n%v", got, want)
			}
			if !*updateHistories {
				return
			}
			var h history.History
			it := c.GetWorkflowHistory(context.Background(), "history-"+name, run.GetRunID(), false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				e, err := it.Next()
				if err != nil {
					t.Fatal(err)
				}
				h.Events = append(h.Events, e)
			}
			data, err := protojson.MarshalOptions{Indent: "  "}.Marshal(&h)
			if err != nil {
				t.Fatal(err)
			}
			os.MkdirAll(filepath.Join("testdata", "histories"), 0o755)
			if err := os.WriteFile(filepath.Join("testdata", "histories", name+".json"), append(data, '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
		})
	}
	agentrecord.AssertGone(t, rec)
}

// cluster is a real server, the acpflow-temporal binary and the
// environment its processes share (the server's address, a blob
// directory), in a directory of the test's.
type cluster struct {
	t   *testing.T
	dir string
	bin string
	env []string
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	s := startServer(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "acpflow-temporal")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/acpflow-temporal").CombinedOutput(); err != nil {
		t.Fatalf("building acpflow-temporal: %v\n%s", err, out)
	}
	env := append(os.Environ(), "TEMPORAL_ADDRESS="+s.addr, "ACPFLOW_TEMPORAL_BLOBS="+filepath.Join(dir, "blobs"))
	return &cluster{t: t, dir: dir, bin: bin, env: env}
}

// start starts acpflow-temporal with args (and extra environment) in its
// own process group, killed with the test.
func (c *cluster) start(extraEnv []string, args ...string) *exec.Cmd {
	c.t.Helper()
	cmd := exec.Command(c.bin, args...)
	cmd.Dir, cmd.Env, cmd.Stderr = c.dir, append(c.env, extraEnv...), os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	return cmd
}

// command is acpflow-temporal with args, not started.
func (c *cluster) command(args ...string) *exec.Cmd {
	cmd := exec.Command(c.bin, args...)
	cmd.Dir, cmd.Env, cmd.Stderr = c.dir, c.env, os.Stderr
	return cmd
}

// killedWorkflow's first step takes long enough for a worker to be
// killed under it; each run's agents record to a file of their own.
const killedWorkflow = `name: killed
inputs:
  n: {type: number, required: true}
agents:
  slow: {command: TESTAGENT, args: [-prompt-delay, 1500ms, -record, "REC/${{ inputs.n }}.jsonl"]}
  demo: {builtin: demo}
steps:
  - {id: one, uses: acp-subagent, with: {agent: slow, prompt: "one ${{ inputs.n }}"}}
  - {id: two, needs: [one], uses: acp-subagent, with: {agent: demo, prompt: "two ${{ inputs.n }}"}}
outputs:
  said: ${{ steps.two.final }}
`

// Two worker processes share a batch; one is killed (SIGKILL) in the
// middle. Every run completes on the other, the killed worker's agents
// die with it, and no step that had succeeded runs again: a run that had
// ended before the kill was prompted once per step, and any step prompted
// twice had its first agent under the killed worker.
func TestAKilledWorkersStepsFinishOnTheOtherWorker(t *testing.T) {
	c := newCluster(t)
	dir := c.dir
	rec := filepath.Join(dir, "rec")
	os.Mkdir(rec, 0o755)
	wfPath := filepath.Join(dir, "killed.yaml")
	os.WriteFile(wfPath, []byte(strings.NewReplacer("TESTAGENT", testAgent, "REC", rec).Replace(killedWorkflow)), 0o644)
	const runsN = 16
	var lines strings.Builder
	for i := 0; i < runsN; i++ {
		fmt.Fprintf(&lines, "{\"n\": %d}\n", i)
	}
	inputs := filepath.Join(dir, "inputs.jsonl")
	os.WriteFile(inputs, []byte(lines.String()), 0o644)
	doomed := c.start(nil, "worker", "--concurrency", "3")
	survivor := c.start(nil, "worker", "--concurrency", "3")
	out := filepath.Join(dir, "results.jsonl")
	// A short heartbeat, so that the killed worker's attempts move soon.
	submit := c.command("run", wfPath, "--inputs", inputs, "--output", out, "--heartbeat", "4s")
	var stdout strings.Builder
	submit.Stdout = &stdout
	if err := submit.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for countLines(out) < 3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	endedBefore := map[float64]bool{}
	for _, r := range readResults(t, out) {
		endedBefore[r.Inputs["n"].(float64)] = true
	}
	syscall.Kill(-doomed.Process.Pid, syscall.SIGKILL)
	doomed.Wait()
	killedAt := len(endedBefore)
	if err := submit.Wait(); err != nil {
		t.Fatalf("run: %v\n%s", err, stdout.String())
	}
	results := readResults(t, out)
	seen := map[float64]int{}
	for _, r := range results {
		if r.Status != engine.StatusSucceeded {
			t.Errorf("run %v: %s %s", r.Inputs["n"], r.Status, r.Error)
		}
		seen[r.Inputs["n"].(float64)]++
	}
	for i := 0; i < runsN; i++ {
		if seen[float64(i)] != 1 {
			t.Errorf("input %d has %d results", i, seen[float64(i)])
		}
	}
	moved := 0
	for i := 0; i < runsN; i++ {
		file := filepath.Join(rec, fmt.Sprintf("%d.jsonl", i))
		agentrecord.AssertGone(t, file)
		var parents []int
		for _, e := range agentrecord.Read(file) {
			if e["event"] == "start" {
				parents = append(parents, int(e["ppid"].(float64)))
			}
		}
		switch {
		case endedBefore[float64(i)] && len(parents) != 1:
			t.Errorf("run %d had ended before the kill, yet its step one started %d agents", i, len(parents))
		case len(parents) == 0:
			t.Errorf("run %d: step one never started an agent", i)
		}
		for _, p := range parents[:len(parents)-1] {
			if p != doomed.Process.Pid {
				t.Errorf("run %d: step one ran again after an agent under worker %d, not the killed %d", i, p, doomed.Process.Pid)
			}
		}
		if len(parents) > 1 {
			moved++
		}
		if last := parents[len(parents)-1]; len(parents) > 1 && last != survivor.Process.Pid {
			t.Errorf("run %d: its step moved to %d, not the surviving worker %d", i, last, survivor.Process.Pid)
		}
	}
	if moved == 0 {
		t.Error("no step was in flight on the killed worker: the kill proved nothing")
	}
	t.Logf("killed after %d of %d runs had ended; %d steps moved to the other worker", killedAt, runsN, moved)
}

// A worker that stalls (SIGSTOP) past the heartbeat timeout loses its
// attempt to another worker; when it wakes, Temporal tells it the attempt
// is no longer its own, and it tears the agent's group down at once
// rather than finishing a turn whose result no one takes.
func TestAStalledWorkerTearsItsAgentDownWhenItsHeartbeatTimedOut(t *testing.T) {
	c := newCluster(t)
	rec := filepath.Join(c.dir, "rec")
	os.Mkdir(rec, 0o755)
	wfPath := filepath.Join(c.dir, "stall.yaml")
	// A 30 s turn, so that a worker that finished it instead of tearing the
	// agent down keeps the agent far past the 20 s the test waits after
	// the wake (a hang guard: the teardown takes a heartbeat, ~3 s).
	src := strings.NewReplacer("TESTAGENT", testAgent, "REC", rec, "1500ms", "30s").Replace(killedWorkflow)
	os.WriteFile(wfPath, []byte(src), 0o644)
	stalled := c.start(nil, "worker")
	submit := c.command("run", wfPath, "--input", "n=1", "--heartbeat", "3s", "--json")
	var stdout strings.Builder
	submit.Stdout = &stdout
	if err := submit.Start(); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(rec, "1.jsonl")
	waitFor(t, file, "prompt", 1)
	agents := agentrecord.Named(file, "start")
	syscall.Kill(stalled.Process.Pid, syscall.SIGSTOP)
	c.start(nil, "worker")
	// The attempt moves once the stalled worker's heartbeat times out.
	waitFor(t, file, "prompt", 2)
	woke := time.Now()
	syscall.Kill(stalled.Process.Pid, syscall.SIGCONT)
	pid := int(agents[0]["pid"].(float64))
	for alive(pid) && time.Since(woke) < 20*time.Second {
		time.Sleep(50 * time.Millisecond)
	}
	if alive(pid) {
		t.Errorf("the stalled worker's agent %d still runs %s after it woke", pid, time.Since(woke))
	} else {
		t.Logf("the stalled worker's agent was gone %s after it woke", time.Since(woke).Round(time.Millisecond))
	}
	if err := submit.Wait(); err != nil {
		t.Fatalf("run: %v\n%s", err, stdout.String())
	}
	if !strings.Contains(stdout.String(), `"status":"succeeded"`) {
		t.Errorf("the run did not succeed on the other worker:\n%s", stdout.String())
	}
	agentrecord.AssertGone(t, file)
}

// waitFor waits until the record file holds n events named event.
func waitFor(t *testing.T, file, event string, n int) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if got := agentrecord.Named(file, event); len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: fewer than %d %s events within a minute", file, n, event)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

type lineResult struct {
	Status engine.Status  `json:"status"`
	Error  string         `json:"error"`
	Inputs map[string]any `json:"inputs"`
}

func readResults(t *testing.T, path string) []lineResult {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []lineResult
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var r lineResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("a torn result line: %q", sc.Text())
		}
		out = append(out, r)
	}
	return out
}

func countLines(path string) int {
	data, _ := os.ReadFile(path)
	return strings.Count(string(data), "\n")
}

// The same command submitted again takes its run up: after a failure it
// runs only what did not succeed (the step that had succeeded is not
// prompted again), and after a success it runs nothing.
func TestAResubmittedRunDoesNotRedoWhatSucceeded(t *testing.T) {
	c := newCluster(t)
	dir := c.dir
	rec := filepath.Join(dir, "record.jsonl")
	wfPath := filepath.Join(dir, "again.yaml")
	// Step two's stop reason is the worker's environment: refusal on the
	// first worker, end_turn on the second.
	os.WriteFile(wfPath, []byte(strings.NewReplacer("TESTAGENT", testAgent, "REC", rec).Replace(`name: again
agents:
  first: {command: TESTAGENT, args: [-record, REC]}
  second: {command: TESTAGENT, args: [-record, REC, -stop, "${{ env.SECOND_STOP }}"]}
steps:
  - {id: one, uses: acp-subagent, with: {agent: first, prompt: "one"}}
  - {id: two, needs: [one], uses: acp-subagent, with: {agent: second, prompt: "two"}}
`)), 0o644)
	worker := func(stop string) *exec.Cmd { return c.start([]string{"SECOND_STOP=" + stop}, "worker") }
	submit := func() (int, string) {
		cmd := c.command("run", wfPath, "--json")
		out, _ := cmd.Output()
		return cmd.ProcessState.ExitCode(), string(out)
	}
	prompts := func() map[string]int {
		n := map[string]int{}
		for _, e := range agentrecord.Named(rec, "prompt") {
			n[agentrecord.PromptText(e)]++
		}
		return n
	}
	w := worker("refusal")
	if code, out := submit(); code != 1 || !strings.Contains(out, `"status":"failed"`) {
		t.Fatalf("first submit: exit %d\n%s", code, out)
	}
	syscall.Kill(-w.Process.Pid, syscall.SIGTERM)
	w.Wait()
	worker("end_turn")
	if code, out := submit(); code != 0 || !strings.Contains(out, `"type":"run_end"`) || !strings.Contains(out, `"status":"succeeded"`) {
		t.Fatalf("second submit: exit %d\n%s", code, out)
	}
	if got := prompts(); got["one"] != 1 || got["two"] != 2 {
		t.Errorf("prompts %v: want one once (it had succeeded), two twice", got)
	}
	if code, _ := submit(); code != 0 {
		t.Fatalf("third submit: exit %d", code)
	}
	if got := prompts(); got["one"] != 1 || got["two"] != 2 {
		t.Errorf("after a run that succeeded, prompts %v: want nothing run again", got)
	}
	agentrecord.AssertGone(t, rec)
}
