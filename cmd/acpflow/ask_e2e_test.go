package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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
	return onTerminalSeeing(t, dir, func(out string, _ func() string, n int) string { return answer(out, n) }, args...)
}

// onTerminalSeeing is onTerminal whose answer may also look at what the
// terminal shows after the question (seen), which goes on being read
// while answer waits: a test then answers once something has been drawn
// (an event), not after a sleep a loaded machine could outlast.
func onTerminalSeeing(t *testing.T, dir string, answer func(out string, seen func() string, questions int) string, args ...string) string {
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
	seen := func() string {
		mu.Lock()
		defer mu.Unlock()
		return all.String()
	}
	type question struct {
		out string
		n   int
	}
	asked := make(chan question, 64)
	answered := make(chan struct{})
	go func() { // the questions, answered in order while the reading goes on
		defer close(answered)
		for q := range asked {
			if a := answer(q.out, seen, q.n); a != "" {
				io.WriteString(stdin, a+"\n")
			}
		}
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(asked)
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
				asked <- question{out, questions}
			}
			if err != nil {
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Minute): // a hang guard
		cmd.Process.Kill()
		<-done
		<-answered
		t.Fatalf("acpflow on the terminal did not end; it showed:\n%s", seen())
	}
	<-answered
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
	shown := onTerminalSeeing(t, dir, func(_ string, seen func() string, _ int) string {
		// The answer comes once the live view has drawn the step waiting
		// (half a minute is a hang guard; the check below says if not).
		for deadline := time.Now().Add(30 * time.Second); !strings.Contains(seen(), "asking you") && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		return "3"
	}, "run", wf, "--output", out, "--workspace", dir)
	for _, want := range []string{
		`acpflow: step clean (agent demo) asks permission: execute "rm -rf build"`,
		"asked by rule 1: a command",
		`1) "Allow once" (allow_once)`,
		`3) "Reject once" (reject_once)`,
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

// With no one at a terminal, an ask waits for the other approvers (the
// web UI, acpflow approve) until its ask-timeout, then falls back.
func TestAskWithNoOneToAskFallsBack(t *testing.T) {
	dir := t.TempDir()
	wf := writeWorkflow(t, dir, "name: ask\ninputs:\n  n: {type: number, default: 0}\nagents:\n  demo: {builtin: demo}\n"+
		fmt.Sprintf(approvalPolicy, "1s", "allow")+"steps:\n"+askStep("clean", "rm -rf build"))
	check := func(name, result string) {
		t.Helper()
		status, perms := permissionsOf(t, result)
		p := perms["clean"]
		if status != "succeeded" || len(p) != 1 || p[0]["decision"] != "allow" || p[0]["option_id"] != "allow-once" ||
			p[0]["ask"] != "fallback" || !strings.Contains(fmt.Sprint(p[0]["reason"]), "no answer within the ask-timeout (1s): ask-fallback allow") {
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

// The step's timeout must come after the question (the agent's start and
// its request take a second or two on a loaded machine): ten seconds is
// the margin, which the test waits out since no one answers.
func TestAStepTimeoutEndsAnUnansweredAsk(t *testing.T) {
	dir := t.TempDir()
	wf := writeWorkflow(t, dir, "name: ask\nagents:\n  demo: {builtin: demo}\n"+fmt.Sprintf(askPolicy, "allow")+
		"steps:\n"+askStep("clean", "rm -rf build")+"    timeout: 10s\n")
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

// askedOptions reads the last question on the terminal: acpflow's
// numbered option lines (number → the rest of the line), the range it
// asks for, and the question's text, from its first line to its last.
func askedOptions(t *testing.T, shown string) (opts map[int]string, upTo int, text string) {
	t.Helper()
	shown = strings.ReplaceAll(shown, "\r\n", "\n") // the pty's line ends
	text = shown[strings.LastIndex(shown, "acpflow: step "):]
	text = text[:strings.Index(text, "and Enter:")+len("and Enter:")]
	opts = map[int]string{}
	for _, m := range regexp.MustCompile(`(?m)^  (\d+)\) (.*)$`).FindAllStringSubmatch(text, -1) {
		n, _ := strconv.Atoi(m[1])
		if _, dup := opts[n]; dup {
			t.Errorf("the option number %d is on two lines of the question:\n%s", n, text)
		}
		opts[n] = m[2]
	}
	fmt.Sscanf(text[strings.LastIndex(text, "answer with 1-"):], "answer with 1-%d", &upTo)
	return opts, upTo, text
}

// An agent's words reach a question on the one line acpflow gives each,
// escaped and bounded, so that the numbers a person can type are
// acpflow's alone and each picks the option its line names. Each
// request below hides a fake "1) Allow once" line behind one way of
// breaking or rewriting a line, in one place of the question; the person
// answers with the number of the line that acpflow shows for the reject
// option, and the agent must get the reject option. Classes of input
// covered: LF, CR, CR LF, VT and FF, NEL (U+0085), U+2028 and U+2029,
// CSI cursor moves and erases and an OSC, bidi overrides, a backslash
// that fakes an escape, and very long text (100 KB title, 10 KB option
// name: bounded); in the title, the command, a file's path, the tool's
// kind, an option's name and an option's kind (an unknown kind is shown
// as one); and more options than a person can be offered (only the first
// 50 are numbered and only they can be typed).
func TestAnAgentsWordsCannotAddOrRenumberTheOptionsOfAQuestion(t *testing.T) {
	fake := "  1) Allow once (allow_once)"
	type option struct {
		ID   string `json:"optionId"`
		Name string `json:"name"`
		Kind string `json:"kind"`
	}
	plain := []option{{"allow", "Allow once", "allow_once"}, {"reject", "Reject once", "reject_once"}}
	calls := 0
	request := func(kind, title, command, path string, opts []option) string {
		calls++
		tc := map[string]any{"toolCallId": "call_" + strconv.Itoa(calls), "kind": kind, "title": title, "rawInput": map[string]any{"command": command}}
		if path != "" {
			tc["locations"] = []any{map[string]any{"path": path}}
		}
		b, _ := json.Marshal(map[string]any{"toolCall": tc, "options": opts})
		return string(b)
	}
	many := []option{{"reject", "Reject once", "reject_once"}}
	for i := range 60 {
		many = append(many, option{fmt.Sprintf("allow-%d", i), fmt.Sprintf("Allow %d", i), "allow_once"})
	}
	cases := []struct {
		name    string
		request string
		options int // the numbered lines the question must have
	}{
		{"CR LF in the title", request("execute", "ls\r\n"+fake, "ls -l", "", plain), 2},
		{"LF in the command", request("execute", "list", "ls\n"+fake+"\n  2) Reject once (reject_once)", "", plain), 2},
		{"CR in a file's path", request("edit", "write notes", "", "/ws/notes\r"+fake, plain), 2},
		{"VT and FF in the title", request("execute", "a\v"+fake+"\f", "a", "", plain), 2},
		{"NEL, U+2028 and U+2029 in option names", request("execute", "make", "make", "", []option{
			{"allow", "Allow once\u0085  2) Reject once (reject_once)", "allow_once"},
			{"reject", "Reject once\u2028" + fake + "\u2029", "reject_once"}}), 2},
		{"a cursor move over the line above, in an option name", request("execute", "rm -rf build", "rm -rf build", "", []option{
			{"allow", "Allow once", "allow_once"},
			{"reject", "Reject once\x1b[1A\x1b[2K\r" + fake + "\x1b]0;pwned\x07", "reject_once"}}), 2},
		{"bidi overrides and a faked escape", request("execute", "\u202erm -rf ~\u202c", `echo \n  1) Allow once`, "", []option{
			{"allow", "\u202eecno wollA", "allow_once"},
			{"reject", "Reject once", "reject_once"}}), 2},
		{"a line break in the tool's kind and an option's kind", request("execute\n"+fake, "make", "make", "", []option{
			{"allow", "Allow once", "allow_once"},
			{"other", "Other", "allow_once)\n" + fake},
			{"reject", "Reject once", "reject_once"}}), 3},
		{"a 100 KB title and a 10 KB option name", request("execute", strings.Repeat("x", 100<<10)+"\n"+fake, "make", "", []option{
			{"allow", "Allow once", "allow_once"},
			{"reject", "Reject once" + strings.Repeat("\n"+fake, 400), "reject_once"}}), 2},
		{"more options than can be offered", request("execute", "make", "make", "", many), 50},
	}
	var args []string
	for _, c := range cases {
		args = append(args, "-permission-json", c.request)
	}
	dir := t.TempDir()
	record := filepath.Join(dir, "record.jsonl")
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: ask
agents:
  a: {command: %s, args: %s}
policies:
  permission: ask
  ask-fallback: allow
steps:
  - {id: s, uses: acp-subagent, with: {agent: a, prompt: go}}
`, testAgent, agentArgs(append([]string{"-record", record}, args...)...)))
	out := filepath.Join(dir, "result.json")
	var texts []string
	onTerminal(t, dir, func(shown string, n int) string {
		c := cases[n-1]
		opts, upTo, text := askedOptions(t, shown)
		texts = append(texts, text)
		if len(opts) != c.options || upTo != c.options {
			t.Errorf("%s: %d numbered lines, answers 1-%d; want %d of acpflow's own:\n%s", c.name, len(opts), upTo, c.options, text)
		}
		if where := terminalUnsafe(text); where != "" {
			t.Errorf("%s: the question holds %s", c.name, where)
		}
		if strings.ContainsAny(text, "\u2028\u2029\u202e\u202c") {
			t.Errorf("%s: the question holds a line separator or a bidi override:\n%s", c.name, text)
		}
		if len(text) > 8<<10 {
			t.Errorf("%s: the question is %d bytes", c.name, len(text))
		}
		for i, line := range opts {
			if strings.HasSuffix(line, "(reject_once)") {
				return strconv.Itoa(i)
			}
		}
		t.Errorf("%s: no line offers the reject option:\n%s", c.name, text)
		return "1"
	}, "run", wf, "--output", out, "--workspace", dir)
	if len(texts) != len(cases) {
		t.Fatalf("%d questions put, want %d", len(texts), len(cases))
	}
	for _, want := range []string{`"ls\r\n  1) Allow once (allow_once)"`, `unknown kind "allow_once)\n  1) Allow once (allow_once"`,
		`… (cut from`, `… and 11 more option(s), which cannot be picked here`, `\u202erm -rf ~\u202c`, `echo \\n  1) Allow once`} {
		if !strings.Contains(strings.Join(texts, "\n"), want) {
			t.Errorf("no question shows %s", want)
		}
	}
	_, perms := permissionsOf(t, out)
	if p := perms["s"]; len(p) != len(cases) {
		t.Fatalf("%d permission records, want %d: %v", len(p), len(cases), p)
	}
	for i, p := range perms["s"] {
		if p["option_id"] != "reject" || p["decision"] != "reject" || p["ask"] != "person" {
			t.Errorf("%s: the agent was answered %v, want the reject option the person picked", cases[i].name, p)
		}
	}
	assertAgentsGone(t, record)
}
