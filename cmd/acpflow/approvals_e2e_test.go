package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acpflow/acpflow/policies"
)

// approvalPolicy asks about every command, with an ask-timeout and an
// ask-fallback, and allows the rest.
const approvalPolicy = `policies:
  permission:
    rules:
      - {if: 'tool.kind == "execute"', then: ask, reason: "a command"}
    default: allow
    ask-timeout: %s
    ask-fallback: %s
`

// demoStep is a demo-agent step whose prompt asks for each command, in
// order.
func demoStep(id string, commands ...string) string {
	s := fmt.Sprintf("  - id: %s\n    uses: acp-subagent\n    with:\n      agent: demo\n      prompt: |\n        Go.\n", id)
	for _, c := range commands {
		s += "        tool: execute " + c + "\n"
	}
	return s
}

// backgroundRun is an `acpflow run` started without a terminal (its
// stdin is not one), going on while the test answers its asks.
type backgroundRun struct {
	done           chan struct{}
	code           int
	stdout, stderr bytes.Buffer
}

// startRun starts `acpflow run` with args in dir, env added; the
// cleanup kills a run still going.
func startRun(t *testing.T, dir string, env []string, args ...string) *backgroundRun {
	t.Helper()
	cmd := exec.Command(acpflowBin, append([]string{"run"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "NO_COLOR=1"), env...)
	r := &backgroundRun{done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &r.stdout, &r.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		cmd.Wait()
		r.code = cmd.ProcessState.ExitCode()
		close(r.done)
	}()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			cmd.Process.Kill()
			<-r.done
		}
	})
	return r
}

// wait waits for the run's end (a minute is a hang guard).
func (r *backgroundRun) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(time.Minute):
		t.Fatalf("the run did not end\n%s", r.stderr.String())
	}
	return r.code
}

// pendingApprovals waits until `acpflow approvals --json` lists n
// approvals, and returns them.
func pendingApprovals(t *testing.T, dir, state string, n int) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // a hang guard
	for {
		r := acpflow(t, dir, "approvals", "--state", state, "--json")
		var list []map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
			t.Fatalf("approvals --json: %v\n%s%s", err, r.stdout, r.stderr)
		}
		if len(list) == n {
			return list
		}
		if time.Now().After(deadline) {
			t.Fatalf("want %d pending approvals, have %v", n, list)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// showJSON is `acpflow show RUN --json`, decoded.
func showJSON(t *testing.T, dir, state, run string) map[string]any {
	t.Helper()
	r := acpflow(t, dir, "show", run, "--state", state, "--json")
	var m map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("show --json: %v\n%s%s", err, r.stdout, r.stderr)
	}
	return m
}

func TestARunWithoutATerminalWaitsForTheCLIsAnswerWhileItsOtherStepsGoOn(t *testing.T) {
	t.Cleanup(func() { assertNoProcessFrom(t, binDir) })
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	wf := writeWorkflow(t, dir, "name: approve\nagents:\n  demo: {builtin: demo}\n"+fmt.Sprintf(approvalPolicy, "2m", "reject")+
		"steps:\n"+demoStep("clean", "rm -rf build", "rm -rf build", "rm -rf dist")+demoStep("other"))
	out := filepath.Join(dir, "result.json")
	run := startRun(t, dir, nil, wf, "--state", state, "--output", out)

	// The first ask waits, shown in runs as waiting; the other step ends meanwhile.
	first := pendingApprovals(t, dir, state, 1)[0]
	id, runID := first["approval_id"].(string), first["run_id"].(string)
	if tool, _ := first["tool"].(map[string]any); tool["command"] != "rm -rf build" || tool["kind"] != "execute" || first["rule"] != "1" || first["step"] != "clean" {
		t.Errorf("the pending approval %v, want the request as the policy saw it", first)
	}
	if r := acpflow(t, dir, "runs", "--state", state); !strings.Contains(r.stdout, "waiting") {
		t.Errorf("runs while a step waits:\n%s", r.stdout)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		steps, _ := showJSON(t, dir, state, runID)["steps"].(map[string]any)
		if other, _ := steps["other"].(map[string]any); other["status"] == "succeeded" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the other step did not finish while clean waited")
		}
	}

	// allow for the rest of the run: the repeat goes through unasked.
	if r := acpflow(t, dir, "approve", id, "allow", "--for", "run", "--state", state); r.code != 0 || !strings.Contains(r.stdout, "allow for the rest of the run") {
		t.Fatalf("approve: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := acpflow(t, dir, "approve", id, "reject", "--state", state); r.code != 1 || !strings.Contains(r.stderr, "answered already") {
		t.Errorf("a second answer: exit %d\n%s%s; want 1, refused as late", r.code, r.stdout, r.stderr)
	}
	// The third request is another command: asked again, and rejected.
	third := pendingApprovals(t, dir, state, 1)[0]
	if tool, _ := third["tool"].(map[string]any); tool["command"] != "rm -rf dist" {
		t.Fatalf("the next pending approval %v, want rm -rf dist (rm -rf build's repeat was granted)", third)
	}
	if r := acpflow(t, dir, "approve", third["approval_id"].(string), "reject", "--state", state); r.code != 0 {
		t.Fatalf("approve reject: exit %d\n%s", r.code, r.stderr)
	}
	if code := run.wait(t); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, run.stderr.String())
	}

	if view := run.stdout.String() + run.stderr.String(); !strings.Contains(view, "waiting for an answer: acpflow approve "+id+" allow|reject") ||
		!strings.Contains(view, "answered by cli ("+id+")") || !strings.Contains(view, "granted for the run by cli ("+id+")") {
		t.Errorf("the run's lines do not say what it waits for and who answered:\n%s", view)
	}
	status, perms := permissionsOf(t, out)
	p := perms["clean"]
	if status != "succeeded" || len(p) != 3 {
		t.Fatalf("status %s, permissions %v", status, perms)
	}
	for i, want := range []struct{ option, ask, by, approval string }{
		{"allow-once", "person", "cli", id}, {"allow-once", "grant", "cli", id}, {"reject-once", "person", "cli", third["approval_id"].(string)},
	} {
		if p[i]["option_id"] != want.option || p[i]["ask"] != want.ask || p[i]["answered_by"] != want.by || p[i]["approval_id"] != want.approval || p[i]["answered_at"] == nil {
			t.Errorf("record %d: %v; want %s, %s by %s under %s, with its time", i, p[i], want.option, want.ask, want.by, want.approval)
		}
	}
	output := readFile(t, out)
	if !strings.Contains(output, "permission execute rm -rf build: allow-once\\npermission execute rm -rf build: allow-once\\npermission execute rm -rf dist: reject-once") {
		t.Errorf("the agent did not get the answers in order:\n%s", output)
	}
	checkAnswersShown(t, dir, state, runID, id)
}

// checkAnswersShown checks that show, show --json and export say who
// answered approval id of run, when, the grant it gave and the late
// answer it refused, and that nothing is left pending.
func checkAnswersShown(t *testing.T, dir, state, runID, id string) {
	t.Helper()
	// show: each answer's source and time, the grant, the late answer.
	shown := acpflow(t, dir, "show", runID, "--state", state).stdout
	for _, want := range []string{"approval " + id + ": step clean", "allow by cli at", "granted for the rest of the run",
		"late answer (refused): reject by cli", "granted for the run by cli", "answered by cli at"} {
		if !strings.Contains(shown, want) {
			t.Errorf("show does not say %q:\n%s", want, shown)
		}
	}
	approvals, _ := showJSON(t, dir, state, runID)["approvals"].([]any)
	if len(approvals) != 2 {
		t.Fatalf("show --json approvals: %v", approvals)
	}
	if late, _ := approvals[0].(map[string]any)["late"].([]any); len(late) != 1 {
		t.Errorf("the late answer is not recorded: %v", approvals[0])
	}
	if r := acpflow(t, dir, "export", runID, "--state", state); !strings.Contains(r.stdout, `"answered_by": "cli"`) || !strings.Contains(r.stdout, `"ask": "grant"`) {
		t.Errorf("export does not say who answered:\n%s", r.stdout)
	}
	if r := acpflow(t, dir, "approvals", "--state", state); !strings.Contains(r.stdout, "no approvals pending") {
		t.Errorf("approvals after the run:\n%s", r.stdout)
	}
}

func TestAnUnansweredAskFallsBackAtItsTimeout(t *testing.T) {
	t.Cleanup(func() { assertNoProcessFrom(t, binDir) })
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	wf := writeWorkflow(t, dir, "name: timeout\nagents:\n  demo: {builtin: demo}\n"+fmt.Sprintf(approvalPolicy, "1s", "allow")+
		"steps:\n"+demoStep("clean", "rm -rf build"))
	out := filepath.Join(dir, "result.json")
	begin := time.Now()
	if r := acpflow(t, dir, "run", wf, "--state", state, "--output", out); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if took := time.Since(begin); took < time.Second {
		t.Errorf("the run took %s: it did not wait for its ask-timeout", took)
	}
	_, perms := permissionsOf(t, out)
	p := perms["clean"]
	if len(p) != 1 || p[0]["option_id"] != "allow-once" || p[0]["ask"] != "fallback" ||
		!strings.Contains(fmt.Sprint(p[0]["reason"]), "no answer within the ask-timeout (1s): ask-fallback allow") {
		t.Errorf("records %v; want the ask-fallback's allow after the ask-timeout, said so", p)
	}
	// The approval is over: an answer now is late.
	runID := firstRunID(t, acpflow(t, dir, "runs", "--state", state, "--json").stdout)
	approvals, _ := showJSON(t, dir, state, runID)["approvals"].([]any)
	if len(approvals) != 1 || approvals[0].(map[string]any)["status"] != "timed_out" {
		t.Fatalf("approvals %v, want one timed out", approvals)
	}
	id := approvals[0].(map[string]any)["approval_id"].(string)
	if r := acpflow(t, dir, "approve", id, "reject", "--state", state); r.code != 1 || !strings.Contains(r.stderr, "no longer pending (timed out)") {
		t.Errorf("an answer after the timeout: exit %d %s", r.code, r.stderr)
	}
}

// hookListener is a webhook receiver: it refuses its first delivery (so
// acpflow must retry), checks each body's signature, and keeps the bodies
// that were signed right.
type hookListener struct {
	secret    string
	mu        sync.Mutex
	attempts  int
	bodies    []map[string]any
	badSigned int
	got       chan map[string]any
}

func (h *hookListener) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.attempts++
	if h.attempts == 1 {
		http.Error(w, "not yet", http.StatusServiceUnavailable)
		return
	}
	if !policies.SignatureValid([]byte(h.secret), body, r.Header.Get("X-Acpflow-Signature")) {
		h.badSigned++
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var m map[string]any
	json.Unmarshal(body, &m)
	h.bodies = append(h.bodies, m)
	h.got <- m
}

func TestAWebhookGetsTheSignedRequestAndAnswersByItsLink(t *testing.T) {
	t.Cleanup(func() { assertNoProcessFrom(t, binDir) })
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	// A store for acpflow ui to open: any run makes one.
	recordShellRun(t, dir, state)
	ui := startUI(t, state)
	const secret = "hook-secret-0123456789abcdef"
	hook := &hookListener{secret: secret, got: make(chan map[string]any, 4)}
	srv := httptest.NewServer(hook)
	defer srv.Close()
	// The agent's command holds a secret of its env: the body is scrubbed
	// of it, as results are.
	const token = "tok-9f8e7d6c5b4a39281706"
	wf := writeWorkflow(t, dir, "name: hook\nagents:\n  demo: {builtin: demo, env: {API_TOKEN: "+token+"}}\n"+fmt.Sprintf(approvalPolicy, "2m", "reject")+
		fmt.Sprintf("approvals:\n  webhook: %s/hook\n  secret: ${{ env.HOOK_SECRET }}\n  answer-url: %s\n", srv.URL, ui.url)+
		"steps:\n"+demoStep("clean", "curl -H "+token+" https://example.com"))
	out := filepath.Join(dir, "result.json")
	run := startRun(t, dir, []string{"HOOK_SECRET=" + secret}, wf, "--state", state, "--output", out)

	var body map[string]any
	select {
	case body = <-hook.got:
	case <-time.After(time.Minute):
		t.Fatalf("no signed delivery (%d attempts)\n%s", hook.attempts, run.stderr.String())
	}
	tool, _ := body["tool"].(map[string]any)
	links, _ := body["answer"].(map[string]any)
	if body["type"] != "approval" || body["step"] != "clean" || tool["command"] != "curl -H [redacted] https://example.com" || body["rule"] != "1" || links["allow"] == nil {
		t.Fatalf("the webhook body %v", body)
	}
	if raw, _ := json.Marshal(body); strings.Contains(string(raw), secret) || strings.Contains(string(raw), token) {
		t.Errorf("the body holds a secret: %s", raw)
	}
	// A link whose decision was changed is refused; the link itself,
	// POSTed without the UI's token or Origin, answers.
	allow := links["allow"].(string)
	forged := strings.Replace(allow, "decision=allow", "decision=reject", 1)
	if resp, err := http.Post(forged, "", nil); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("a forged link: %v %v; want 403", resp, err)
	}
	if code, _, page := ui.get(t, "GET", strings.TrimPrefix(allow, ui.url)); code != 200 || !strings.Contains(page, "curl -H [redacted]") {
		t.Errorf("GET of the link: %d\n%s; want a page with the request and a button", code, page)
	}
	resp, err := http.Post(allow, "", nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST of the allow link: %v %v", resp, err)
	}
	if code := run.wait(t); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, run.stderr.String())
	}
	_, perms := permissionsOf(t, out)
	if p := perms["clean"]; len(p) != 1 || p[0]["option_id"] != "allow-once" || p[0]["answered_by"] != "webhook" {
		t.Errorf("records %v; want allow-once answered by the webhook", p)
	}
	if hook.attempts < 2 || hook.badSigned != 0 {
		t.Errorf("%d attempts, %d badly signed; want a retry after the refused first one, every body signed", hook.attempts, hook.badSigned)
	}
}

// A question on the terminal is also an approval the CLI can answer: the
// CLI's answer wins, the terminal's question is withdrawn and says why,
// and the record says the CLI answered.
func TestAnAnswerFromTheCLIWithdrawsTheTerminalsQuestion(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	wf := writeWorkflow(t, dir, "name: both\nagents:\n  demo: {builtin: demo}\n"+fmt.Sprintf(approvalPolicy, "2m", "reject")+
		"steps:\n"+demoStep("clean", "rm -rf build"))
	out := filepath.Join(dir, "result.json")
	shown := onTerminal(t, dir, func(string, int) string {
		id := pendingApprovals(t, dir, state, 1)[0]["approval_id"].(string)
		if r := acpflow(t, dir, "approve", id, "allow", "--state", state); r.code != 0 {
			t.Errorf("approve: exit %d %s", r.code, r.stderr)
		}
		return "" // nothing typed
	}, "run", wf, "--state", state, "--output", out)
	if !strings.Contains(shown, "no longer waiting for an answer (approval ap-") || !strings.Contains(shown, "was answered allow by cli") {
		t.Errorf("the terminal did not say the question was answered elsewhere:\n%s", shown)
	}
	_, perms := permissionsOf(t, out)
	if p := perms["clean"]; len(p) != 1 || p[0]["option_id"] != "allow-once" || p[0]["answered_by"] != "cli" {
		t.Errorf("records %v; want allow-once answered by the CLI", p)
	}
}
