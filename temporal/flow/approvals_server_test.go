//go:build temporalserver

package flow

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	agentrecord "github.com/acpflow/acpflow/internal/testagent/record"
)

// askingWorkflow's step asks permission for each command (the test
// agent's -permission), one at a time; the policy asks a person about
// every command, with ask-timeout TIMEOUT and ask-fallback reject; the
// other step asks nothing.
const askingWorkflow = `name: asking
agents:
  asker: {command: TESTAGENT, args: [-record, REC, PERMISSIONS]}
  quiet: {command: TESTAGENT, args: [-record, REC]}
policies:
  permission:
    rules:
      - {if: 'tool.kind == "execute"', then: ask, reason: "a command"}
    default: allow
    ask-timeout: TIMEOUT
    ask-fallback: reject
steps:
  - {id: clean, uses: acp-subagent, with: {agent: asker, prompt: "clean"}}
  - {id: other, uses: acp-subagent, with: {agent: quiet, prompt: "other"}}
`

// askingRun is a cluster with askingWorkflow written for the commands
// given, and its agents' record file.
type askingRun struct {
	*cluster
	wf, rec, out string
}

func newAskingRun(t *testing.T, timeout string, commands ...string) *askingRun {
	c := newCluster(t)
	t.Cleanup(func() { assertNoProcessUnder(t, c.dir) }) // after the cluster's own cleanups
	r := &askingRun{cluster: c, rec: filepath.Join(c.dir, "record.jsonl"), out: filepath.Join(c.dir, "result.json")}
	var perms []string
	for _, cmd := range commands {
		perms = append(perms, fmt.Sprintf("-permission, %q", "execute:"+cmd))
	}
	src := strings.NewReplacer("TESTAGENT", testAgent, "REC", r.rec, "PERMISSIONS", strings.Join(perms, ", "), "TIMEOUT", timeout).Replace(askingWorkflow)
	r.wf = filepath.Join(c.dir, "asking.yaml")
	os.WriteFile(r.wf, []byte(src), 0o644)
	return r
}

// submit starts `acpflow-temporal run` on the workflow (its stdin no
// terminal), its result to r.out.
func (r *askingRun) submit(args ...string) (*exec.Cmd, *strings.Builder) {
	r.t.Helper()
	cmd := r.command(append([]string{"run", r.wf, "--id", "ask", "--output", r.out}, args...)...)
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, &stdout
}

// cli runs acpflow-temporal with args to its end: exit code, stdout,
// stderr.
func (r *askingRun) cli(args ...string) (int, string, string) {
	cmd := r.command(args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Run()
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// approvals is `approvals --json` (with args), decoded.
func (r *askingRun) approvals(args ...string) []map[string]any {
	r.t.Helper()
	code, stdout, stderr := r.cli(append([]string{"approvals", "--json"}, args...)...)
	var list []map[string]any
	if err := json.Unmarshal([]byte(stdout), &list); code != 0 || err != nil {
		r.t.Fatalf("approvals --json %v: exit %d, %v\n%s%s", args, code, err, stdout, stderr)
	}
	return list
}

// pending waits until `approvals --json` lists one pending approval, and
// returns it.
func (r *askingRun) pending() map[string]any {
	r.t.Helper()
	deadline := time.Now().Add(time.Minute) // a hang guard
	for {
		if list := r.approvals(); len(list) == 1 {
			return list[0]
		}
		if time.Now().After(deadline) {
			r.t.Fatal("no approval pending within a minute")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// finished waits for the submitted run and returns the clean step's
// permission records and its output.
func (r *askingRun) finished(submit *exec.Cmd, stdout *strings.Builder) ([]map[string]any, string) {
	r.t.Helper()
	if err := submit.Wait(); err != nil {
		r.t.Fatalf("run: %v\n%s", err, stdout.String())
	}
	var res struct {
		Status string `json:"status"`
		Steps  map[string]struct {
			Output      string           `json:"output"`
			Permissions []map[string]any `json:"permissions"`
		} `json:"steps"`
	}
	data, _ := os.ReadFile(r.out)
	if err := json.Unmarshal(data, &res); err != nil || res.Status != "succeeded" {
		r.t.Fatalf("the run's result (%v):\n%s", err, data)
	}
	return res.Steps["clean"].Permissions, res.Steps["clean"].Output
}

// assertNoProcessUnder fails for any process still running a program
// under dir: the cluster's workers and the agents they started.
func assertNoProcessUnder(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		exe, err := os.Readlink("/proc/" + e.Name() + "/exe")
		if err != nil || !strings.HasPrefix(exe, dir+"/") {
			continue
		}
		var pid int
		if fmt.Sscan(e.Name(), &pid); alive(pid) {
			t.Errorf("process %s (%s) still runs", e.Name(), exe)
		}
	}
}

// checkRecord checks one permission record: the option the agent got, who
// decided (ask), who answered and under which approval.
func checkRecord(t *testing.T, p map[string]any, option, ask, by, approval string) {
	t.Helper()
	if p["option_id"] != option || p["ask"] != ask || p["answered_by"] != nilIfEmpty(by) || p["approval_id"] != nilIfEmpty(approval) ||
		(by != "") != (p["answered_at"] != nil) {
		t.Errorf("record %v: want %s, %s by %q under %q", p, option, ask, by, approval)
	}
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// A step's ask on Temporal waits in the run's workflow while the other
// step finishes; acpflow-temporal approvals lists it and approve answers
// it (the agent gets the allow option, the answer's source and time are
// in the result); --for run grants the repeat; a second answer is refused
// as late and recorded; a reject reaches the agent as its reject option.
func TestATemporalAskWaitsForTheCLIsAnswer(t *testing.T) {
	r := newAskingRun(t, "2m", "rm -rf build", "rm -rf build", "rm -rf dist")
	r.start(nil, "worker")
	submit, stdout := r.submit()

	first := r.pending()
	id := first["approval_id"].(string)
	if tool, _ := first["tool"].(map[string]any); tool["command"] != "rm -rf build" || tool["kind"] != "execute" ||
		first["step"] != "clean" || first["run_id"] != "ask" || first["status"] != "pending" || first["fallback"] != "reject" {
		t.Errorf("the pending approval %v, want the request as the policy saw it", first)
	}
	waitFor(t, r.rec, "eof", 1) // the other step ends meanwhile: its agent is torn down
	if code, out, errOut := r.cli("approve", id, "allow", "--for", "run"); code != 0 || !strings.Contains(out, "allow for the rest of the run") {
		t.Fatalf("approve: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := r.cli("approve", id, "reject"); code != 1 || !strings.Contains(errOut, "answered already") {
		t.Errorf("a second answer: exit %d\n%s%s; want 1, refused as late", code, out, errOut)
	}
	third := r.pending()
	if tool, _ := third["tool"].(map[string]any); tool["command"] != "rm -rf dist" {
		t.Fatalf("the next pending approval %v, want rm -rf dist (rm -rf build's repeat was granted)", third)
	}
	thirdID := third["approval_id"].(string)
	if code, _, errOut := r.cli("approve", thirdID, "reject"); code != 0 {
		t.Fatalf("approve reject: exit %d\n%s", code, errOut)
	}
	perms, output := r.finished(submit, stdout)
	if len(perms) != 3 {
		t.Fatalf("permissions %v", perms)
	}
	checkRecord(t, perms[0], "opt-allow-once", "person", "cli", id)
	checkRecord(t, perms[1], "opt-allow-once", "grant", "cli", id)
	checkRecord(t, perms[2], "opt-reject-once", "person", "cli", thirdID)
	if !strings.Contains(output, "permission execute rm -rf build: opt-allow-once\npermission execute rm -rf build: opt-allow-once\npermission execute rm -rf dist: opt-reject-once") {
		t.Errorf("the agent did not get the answers in order:\n%s", output)
	}
	// The run's approvals: each answer's source and time, the late one.
	all := r.approvals("--run", "ask")
	if len(all) != 2 {
		t.Fatalf("the run's approvals: %v", all)
	}
	answer, _ := all[0]["answer"].(map[string]any)
	late, _ := all[0]["late"].([]any)
	if all[0]["status"] != "answered" || answer["by"] != "cli" || answer["decision"] != "allow" || answer["for_run"] != true || answer["at"] == nil || len(late) != 1 {
		t.Errorf("the first approval as the run keeps it: %v", all[0])
	} else if l := late[0].(map[string]any); l["decision"] != "reject" || l["by"] != "cli" {
		t.Errorf("its late answer: %v", l)
	}
	agentrecord.AssertGone(t, r.rec)
}

// No answer within the ask-timeout: the workflow's timer ends the wait,
// the ask-fallback (reject) answers, and the approval reads timed out.
func TestATemporalAskWithoutAnAnswerFallsBack(t *testing.T) {
	r := newAskingRun(t, "3s", "rm -rf build")
	r.start(nil, "worker")
	submit, stdout := r.submit()
	id := r.pending()["approval_id"].(string)
	perms, output := r.finished(submit, stdout)
	if len(perms) != 1 {
		t.Fatalf("permissions %v", perms)
	}
	checkRecord(t, perms[0], "opt-reject-once", "fallback", "", id)
	if reason, _ := perms[0]["reason"].(string); !strings.Contains(reason, "no answer within the ask-timeout (3s): ask-fallback reject") {
		t.Errorf("the fallback's reason: %q", reason)
	}
	if !strings.Contains(output, "permission execute rm -rf build: opt-reject-once") {
		t.Errorf("the agent did not get the fallback:\n%s", output)
	}
	if all := r.approvals("--run", "ask"); len(all) != 1 || all[0]["status"] != "timed_out" {
		t.Errorf("the run's approvals: %v; want one, timed out", all)
	}
	agentrecord.AssertGone(t, r.rec)
}

// The point of approvals on Temporal: a worker killed (SIGKILL) or
// stopped (SIGTERM) while its step waits for a person loses nothing. The approval stays pending in the
// run's workflow (listed with no worker's step waiting on it), the step
// moves to a new worker, whose agent asks the same and finds the same
// approval, and the answer given then finishes the run.
func TestAnApprovalPendingWhenItsWorkerDiesIsAnsweredOnTheNextWorker(t *testing.T) {
	t.Run("killed", func(t *testing.T) {
		answeredOnTheNextWorker(t, func(w *exec.Cmd) { syscall.Kill(-w.Process.Pid, syscall.SIGKILL) })
	})
	t.Run("stopped", func(t *testing.T) {
		answeredOnTheNextWorker(t, func(w *exec.Cmd) { w.Process.Signal(syscall.SIGTERM) })
	})
}

func answeredOnTheNextWorker(t *testing.T, stop func(*exec.Cmd)) {
	r := newAskingRun(t, "5m", "rm -rf build")
	doomed := r.start(nil, "worker")
	submit, stdout := r.submit("--heartbeat", "3s")
	id := r.pending()["approval_id"].(string)
	agents := agentrecord.Named(r.rec, "start")
	stop(doomed)
	doomed.Wait()
	for _, a := range agents {
		pid := int(a["pid"].(float64))
		for deadline := time.Now().Add(10 * time.Second); alive(pid) && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
		if alive(pid) {
			t.Errorf("agent %d outlived its killed worker", pid)
		}
	}
	r.start(nil, "worker")
	// The attempt moves once the dead worker's heartbeat times out; its
	// agent asks again, under the same approval, still pending.
	waitFor(t, r.rec, "start", len(agents)+1)
	if again := r.pending(); again["approval_id"] != id {
		t.Fatalf("after the restart the pending approval is %v, want %s", again, id)
	}
	if code, out, errOut := r.cli("approve", id, "allow"); code != 0 {
		t.Fatalf("approve: exit %d\n%s%s", code, out, errOut)
	}
	perms, output := r.finished(submit, stdout)
	if len(perms) != 1 {
		t.Fatalf("permissions %v", perms)
	}
	checkRecord(t, perms[0], "opt-allow-once", "person", "cli", id)
	if !strings.Contains(output, "permission execute rm -rf build: opt-allow-once") {
		t.Errorf("the agent did not get the answer:\n%s", output)
	}
	agentrecord.AssertGone(t, r.rec)
}
