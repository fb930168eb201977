package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// askPolicy asks about every command and allows the rest.
const askPolicy = `policies:
  permission:
    rules:
      - {if: 'tool.kind == "execute"', then: ask, reason: "a command"}
    default: allow
    ask-fallback: %s
`

// askStep is a demo-agent step that asks permission to run command.
func askStep(id, command string) string {
	return fmt.Sprintf(`  - id: %s
    uses: acp-subagent
    with:
      agent: demo
      prompt: |
        Clean up.
        tool: execute %s
`, id, command)
}

// onTerminal runs acpflow with args on a pty (util-linux's script) of
// 120 columns, so the live view draws, and calls answer with each question
// as it appears on the terminal (the whole output so far, and how many
// questions there were); what answer returns is typed, unless it is "".
// It returns everything the terminal showed.
func onTerminal(t *testing.T, dir string, answer func(out string, questions int) string, args ...string) string {
	t.Helper()
	scriptBin, err := exec.LookPath("script")
	if err != nil {
		t.Skip("script (util-linux) is not installed: no pty to ask on")
	}
	line := "stty cols 120 rows 40; " + acpflowBin + " " + strings.Join(args, " ")
	cmd := exec.Command(scriptBin, "-qfec", line, "/dev/null")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "TERM=xterm")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { assertNoProcessFrom(t, binDir) })
	var (
		mu  sync.Mutex
		all strings.Builder
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r := bufio.NewReader(stdout)
		questions := 0
		for {
			s, err := r.ReadString('\n')
			mu.Lock()
			all.WriteString(s)
			out := all.String()
			mu.Unlock()
			if strings.Contains(s, "and Enter:") {
				questions++
				if a := answer(out, questions); a != "" {
					io.WriteString(stdin, a+"\n")
				}
			}
			if err != nil {
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("acpflow on the terminal did not end; it showed:\n%s", all.String())
	}
	cmd.Wait()
	stdin.Close()
	return all.String()
}

// permissionsOf reads the result --output wrote: each step's permission
// records.
func permissionsOf(t *testing.T, path string) (status string, steps map[string][]map[string]any) {
	t.Helper()
	var res struct {
		Status string `json:"status"`
		Steps  map[string]struct {
			Permissions []map[string]any `json:"permissions"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(readFile(t, path)), &res); err != nil {
		t.Fatal(err)
	}
	steps = map[string][]map[string]any{}
	for id, s := range res.Steps {
		steps[id] = s.Permissions
	}
	return res.Status, steps
}

func TestAskPutsTheRequestToThePersonAtTheTerminal(t *testing.T) {
	dir := t.TempDir()
	wf := writeWorkflow(t, dir, "name: ask\nagents:\n  demo: {builtin: demo}\n"+fmt.Sprintf(askPolicy, "allow")+"steps:\n"+askStep("clean", "rm -rf build"))
	out := filepath.Join(dir, "result.json")
	shown := onTerminal(t, dir, func(string, int) string {
		time.Sleep(500 * time.Millisecond) // the live view draws the step waiting
		return "3"
	}, "run", wf, "--output", out, "--workspace", dir)
	for _, want := range []string{
		`acpflow: step clean (agent demo) asks permission: execute "rm -rf build"`,
		"asked by rule 1: a command",
		"1) Allow once (allow_once)",
		"3) Reject once (reject_once)",
		"asking you", // the live view's line for the step while it waits
	} {
		if !strings.Contains(shown, want) {
			t.Errorf("the terminal did not show %q:\n%s", want, shown)
		}
	}
	status, perms := permissionsOf(t, out)
	p := perms["clean"]
	if status != "succeeded" || len(p) != 1 {
		t.Fatalf("status %s, permissions %v", status, perms)
	}
	if p[0]["decision"] != "reject" || p[0]["option_id"] != "reject-once" || p[0]["ask"] != "person" || p[0]["rule"] != "1" {
		t.Errorf("the record %v, want the option the person picked (reject-once), asked of a person by rule 1", p[0])
	}
}

func TestAskWithNoOneToAskFallsBack(t *testing.T) {
	dir := t.TempDir()
	wf := writeWorkflow(t, dir, "name: ask\ninputs:\n  n: {type: number, default: 0}\nagents:\n  demo: {builtin: demo}\n"+
		fmt.Sprintf(askPolicy, "allow")+"steps:\n"+askStep("clean", "rm -rf build"))
	check := func(name, result string) {
		t.Helper()
		status, perms := permissionsOf(t, result)
		p := perms["clean"]
		if status != "succeeded" || len(p) != 1 || p[0]["decision"] != "allow" || p[0]["option_id"] != "allow-once" ||
			p[0]["ask"] != "fallback" || !strings.Contains(fmt.Sprint(p[0]["reason"]), "no one to ask: ask-fallback allow") {
			t.Errorf("%s: status %s, records %v; want the ask-fallback's allow, said so", name, status, p)
		}
	}
	// No terminal (stdin is not one).
	out := filepath.Join(dir, "plain.json")
	if r := acpflow(t, dir, "run", wf, "--output", out); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	check("without a terminal", out)
	// A terminal, but --json, and a batch: no question is put.
	never := func(out string, _ int) string { t.Errorf("a question was put:\n%s", out); return "1" }
	out = filepath.Join(dir, "json.json")
	onTerminal(t, dir, never, "run", wf, "--json", "--output", out)
	check("with --json", out)
	inputs := filepath.Join(dir, "in.jsonl")
	os.WriteFile(inputs, []byte("{\"n\": 1}\n"), 0o644)
	out = filepath.Join(dir, "batch.json")
	onTerminal(t, dir, never, "run", wf, "--inputs", inputs, "--output", out)
	check("in a batch", out)
}

func TestConcurrentAsksAreQueuedOneAtATime(t *testing.T) {
	dir := t.TempDir()
	wf := writeWorkflow(t, dir, "name: ask\nagents:\n  demo: {builtin: demo}\n"+fmt.Sprintf(askPolicy, "reject")+
		"steps:\n"+askStep("left", "make left")+askStep("right", "make right"))
	out := filepath.Join(dir, "result.json")
	var order []string
	onTerminal(t, dir, func(shown string, n int) string {
		// The nth question is on the terminal, and no question after it.
		if c := strings.Count(shown, "asks permission"); c != n {
			t.Errorf("%d questions on the terminal when question %d came:\n%s", c, n, shown)
		}
		last := shown[strings.LastIndex(shown, "acpflow: step "):]
		step := strings.Fields(last)[2]
		order = append(order, step)
		time.Sleep(300 * time.Millisecond) // the other step has asked by now, and waits its turn
		if step == "left" {
			return "1" // allow once
		}
		return "3" // reject once
	}, "run", wf, "--output", out)
	if len(order) != 2 || order[0] == order[1] {
		t.Fatalf("questions asked for %v, want one per step", order)
	}
	_, perms := permissionsOf(t, out)
	if l, r := perms["left"], perms["right"]; len(l) != 1 || len(r) != 1 || l[0]["option_id"] != "allow-once" || r[0]["option_id"] != "reject-once" {
		t.Errorf("left %v, right %v; want each step's own answer", l, r)
	}
}

func TestAStepTimeoutEndsAnUnansweredAsk(t *testing.T) {
	dir := t.TempDir()
	wf := writeWorkflow(t, dir, "name: ask\nagents:\n  demo: {builtin: demo}\n"+fmt.Sprintf(askPolicy, "allow")+
		"steps:\n"+askStep("clean", "rm -rf build")+"    timeout: 1s\n")
	out := filepath.Join(dir, "result.json")
	shown := onTerminal(t, dir, func(string, int) string { return "" }, "run", wf, "--output", out)
	if !strings.Contains(shown, "step clean: no longer waiting for an answer") {
		t.Errorf("the terminal was not told the question is over:\n%s", shown)
	}
	status, perms := permissionsOf(t, out)
	p := perms["clean"]
	if status != "failed" || len(p) != 1 || p[0]["outcome"] != "cancelled" || p[0]["ask"] != "unanswered" {
		t.Errorf("status %s, records %v; want the step failed and the request answered cancelled, unanswered", status, p)
	}
}
