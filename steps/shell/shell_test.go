package shell_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acpflow/acpflow/internal/procgroup"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/shell"
)

// TestMain makes the test binary a subreaper, as the acpflow binary is
// (cmd/acpflow): a process that leaves the shell's group and loses its
// parent comes to acpflow, which finds and kills it.
func TestMain(m *testing.M) {
	if err := procgroup.EnableSubreaper(); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

// processes keeps what a step reports of its processes, as the run store
// does, so that a test can prove each one gone.
type processes struct {
	mu    sync.Mutex
	procs []procgroup.Proc
	ended []int
	// startErr is what Started returns: a record that cannot be written.
	startErr error
}

func (p *processes) Started(pid int, ticks uint64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.procs = append(p.procs, procgroup.Proc{PID: pid, StartTicks: ticks})
	return p.startErr
}

func (p *processes) Seen(_, pid int, ticks uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.procs = append(p.procs, procgroup.Proc{PID: pid, StartTicks: ticks})
}

func (p *processes) Ended(pid, _ int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ended = append(p.ended, pid)
}

// events keeps a step's events.
type events struct {
	mu  sync.Mutex
	all []steps.Event
}

func (e *events) Emit(ev steps.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, ev)
}

func (e *events) kinds() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, ev := range e.all {
		out = append(out, ev.Kind())
	}
	return out
}

// recordErr is what the run record says when the step reports its shell
// started (nil: on record); a test that sets it resets it.
var recordErr error

// attempt is one shell step run for a test.
type attempt struct {
	res    steps.Result
	procs  *processes
	events *events
	dir    string
}

// run prepares a shell step from with and runs it in a fresh workspace
// with ambient as acpflow's environment, then proves that every process
// it reported is gone, and that the shell's end was reported.
func run(t *testing.T, ctx context.Context, with map[string]any, ambient map[string]string, env policies.Env) attempt {
	t.Helper()
	return runEdited(t, ctx, with, ambient, env, nil)
}

// runEdited is run with the invocation changed by edit (nil: as run
// makes it) before the step runs.
func runEdited(t *testing.T, ctx context.Context, with map[string]any, ambient map[string]string, env policies.Env, edit func(*steps.Invocation)) attempt {
	t.Helper()
	s, err := shell.Kind{}.Prepare(steps.StepConfig{ID: "t", With: with})
	if err != nil {
		t.Fatalf("Prepare(%v): %v", with, err)
	}
	if ambient == nil {
		ambient = map[string]string{"PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME")}
	}
	a := attempt{procs: &processes{startErr: recordErr}, events: &events{}, dir: t.TempDir()}
	inv := &steps.Invocation{
		Workflow: "w", RunID: "r", StepID: "t", Attempt: 1, Workspace: a.dir, With: with,
		Ambient: ambient, Env: env, EnvSource: policies.SourceDefault,
		Events: a.events, Processes: a.procs,
	}
	if edit != nil {
		edit(inv)
	}
	a.res = s.Run(ctx, inv)
	a.procs.mu.Lock()
	defer a.procs.mu.Unlock()
	for _, p := range a.procs.procs {
		if procgroup.Alive(p.PID, p.StartTicks) {
			t.Errorf("process %d, which the step started, is alive after it", p.PID)
		}
	}
	if len(a.procs.procs) > 0 && (len(a.procs.ended) != 1 || a.procs.ended[0] != a.procs.procs[0].PID) {
		t.Errorf("the shell %d was not reported ended (ended: %v)", a.procs.procs[0].PID, a.procs.ended)
	}
	return a
}

func code(r steps.Result) string {
	if r.ExitCode == nil {
		return "nil"
	}
	return strconv.Itoa(*r.ExitCode)
}

func TestAZeroExitCompletesWithStdoutAsOutputAndStderrKeptApart(t *testing.T) {
	a := run(t, context.Background(), map[string]any{"run": "echo out; echo err >&2; printf 'two\\nlines'"}, nil, nil)
	if a.res.Err != nil || a.res.StopReason != steps.Completed {
		t.Fatalf("result: %s %v", a.res.StopReason, a.res.Err)
	}
	if a.res.Output != "out\ntwo\nlines" {
		t.Errorf("output = %q, want stdout alone", a.res.Output)
	}
	if a.res.Stderr != "err\n" {
		t.Errorf("stderr = %q", a.res.Stderr)
	}
	if code(a.res) != "0" {
		t.Errorf("exit code = %s, want 0", code(a.res))
	}
	kinds := strings.Join(a.events.kinds(), " ")
	for _, k := range []string{"env", "spawned", "stdout", "teardown", "exited"} {
		if !strings.Contains(kinds, k) {
			t.Errorf("no %s event among %s", k, kinds)
		}
	}
}

func TestANonZeroExitFailsTheStepNamingTheCodeWithTheStderrTail(t *testing.T) {
	a := run(t, context.Background(), map[string]any{"run": "echo partial; echo 'FAIL: TestX' >&2; exit 3"}, nil, nil)
	if a.res.StopReason != steps.Error || a.res.Err == nil {
		t.Fatalf("result: %s %v; want a failure", a.res.StopReason, a.res.Err)
	}
	msg := a.res.Err.Error()
	if !strings.Contains(msg, "exited with code 3") || !strings.Contains(msg, "FAIL: TestX") {
		t.Errorf("error = %q; want the code and the stderr tail", msg)
	}
	if code(a.res) != "3" || a.res.Output != "partial\n" {
		t.Errorf("exit code %s, output %q", code(a.res), a.res.Output)
	}
}

// The default shell stops at the first failing command, and at a failing
// command inside a pipeline: a gate that prints a failure and goes on
// must not pass.
func TestTheDefaultShellStopsAtAFailureAndAFailingPipeline(t *testing.T) {
	for _, line := range []string{"false; echo after", "false | cat; echo after"} {
		a := run(t, context.Background(), map[string]any{"run": line}, nil, nil)
		if a.res.Err == nil || strings.Contains(a.res.Output, "after") || code(a.res) != "1" {
			t.Errorf("%q: exit code %s, output %q, error %v; want exit 1 before echo", line, code(a.res), a.res.Output, a.res.Err)
		}
	}
}

func TestACommandKilledByASignalNamesIt(t *testing.T) {
	a := run(t, context.Background(), map[string]any{"run": "kill -SEGV $$"}, nil, nil)
	if a.res.Err == nil || !strings.Contains(a.res.Err.Error(), "SIGSEGV") || code(a.res) != "139" {
		t.Errorf("exit code %s, error %v; want 139 and SIGSEGV", code(a.res), a.res.Err)
	}
}

// A command that leaves a child running in the background (a server a
// test started, a `sleep &`) ends the step when the shell exits; the
// child, in the group or out of it (setsid), is torn down with it, and
// does not hold the step by holding its stdout.
func TestWhatTheCommandLeftRunningIsTornDown(t *testing.T) {
	for _, line := range []string{"sleep 1000 & echo $!", "setsid sleep 1000 & echo $!"} {
		t.Run(line, func(t *testing.T) {
			a := run(t, context.Background(), map[string]any{"run": line}, nil, nil)
			if a.res.Err != nil {
				t.Fatalf("result: %v", a.res.Err)
			}
			pid, err := strconv.Atoi(strings.TrimSpace(a.res.Output))
			if err != nil {
				t.Fatalf("output %q is not the background pid", a.res.Output)
			}
			if cmd, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); err == nil && strings.HasPrefix(string(cmd), "sleep\x00") {
				t.Errorf("the background sleep %d is still running", pid)
			}
			seen := false
			for _, p := range a.procs.procs {
				seen = seen || p.PID == pid
			}
			if !seen {
				t.Errorf("the background sleep %d was not reported for crash-reaping (reported: %v)", pid, a.procs.procs)
			}
		})
	}
}

func TestATimeoutKillsTheWholeGroup(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	done := make(chan attempt)
	go func() {
		// The shell and a child of its, both waiting: the cancel must end both.
		done <- run(t, ctx, map[string]any{"run": "sleep 1000 & echo $! > " + ready + ".tmp && mv " + ready + ".tmp " + ready + "; sleep 1000"}, nil, nil)
	}()
	waitFile(t, ready)
	cancel(errors.New("step timed out after 1s"))
	a := <-done
	if a.res.StopReason != steps.Aborted || a.res.Err == nil || !strings.Contains(a.res.Err.Error(), "step timed out after 1s") {
		t.Errorf("result: %s %v; want aborted with the cause", a.res.StopReason, a.res.Err)
	}
	if a.res.ExitCode != nil {
		t.Errorf("exit code %d; want none for a command acpflow stopped", *a.res.ExitCode)
	}
	b, _ := os.ReadFile(ready)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if cmd, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); pid == 0 || err == nil && strings.HasPrefix(string(cmd), "sleep\x00") {
		t.Errorf("the shell's child %d is still running (pid file %q)", pid, b)
	}
}

// waitFile waits for the command to write path: a rendezvous, not a
// timing (the test's own timeout bounds it).
func waitFile(t *testing.T, path string) {
	t.Helper()
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		select {
		case <-t.Context().Done():
			t.Fatal("the command never wrote", path)
		default:
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestACancelledStepStartsNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir := t.TempDir()
	a := run(t, ctx, map[string]any{"run": "touch " + filepath.Join(dir, "ran")}, nil, nil)
	if a.res.StopReason != steps.Aborted || len(a.procs.procs) != 0 {
		t.Errorf("result %s, processes %v; want aborted with nothing started", a.res.StopReason, a.procs.procs)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Error("the command ran")
	}
}

// Under the default env policy a credential in acpflow's environment does
// not reach the command, acpflow's own settings do not either, and the
// step's env: values do, over the ambient ones.
func TestTheEnvPolicyDecidesTheCommandsEnvironment(t *testing.T) {
	ambient := map[string]string{
		"PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME"), "LANG": "C.UTF-8",
		"GITHUB_TOKEN": "ghp_secret", "ACPFLOW_POLICY": "/etc/p.yaml", "GREETING": "ambient",
	}
	a := run(t, context.Background(), map[string]any{
		"run": `echo "token=${GITHUB_TOKEN-unset} policy=${ACPFLOW_POLICY-unset} lang=$LANG greeting=$GREETING n=$N pwd=$PWD"`,
		"env": map[string]any{"GREETING": "from the step", "N": 3},
	}, ambient, nil)
	if a.res.Err != nil {
		t.Fatal(a.res.Err)
	}
	want := "token=unset policy=unset lang=C.UTF-8 greeting=from the step n=3 pwd=" + a.dir + "\n"
	if a.res.Output != want {
		t.Errorf("output = %q\nwant     %q", a.res.Output, want)
	}
	strict, err := policies.ParseEnv(map[string]any{"inherit": "none"}, "")
	if err != nil {
		t.Fatal(err)
	}
	b := run(t, context.Background(), map[string]any{"run": `/usr/bin/env`, "env": map[string]any{"ONLY": "this"}}, ambient, strict)
	if b.res.Err != nil {
		t.Fatal(b.res.Err)
	}
	for _, name := range []string{"HOME=", "LANG=", "GREETING=", "PATH="} {
		if strings.Contains(b.res.Output, "\n"+name) || strings.HasPrefix(b.res.Output, name) {
			t.Errorf("inherit: none passed %s:\n%s", name, b.res.Output)
		}
	}
	if !strings.Contains(b.res.Output, "ONLY=this\n") {
		t.Errorf("the step's env did not reach the command:\n%s", b.res.Output)
	}
}

// denyEnv is an env policy that refuses every spawn, as a WASM module may.
type denyEnv struct{}

func (denyEnv) DecideEnv(context.Context, *policies.EnvRequest) (policies.EnvDecision, error) {
	return policies.EnvDecision{Deny: "no commands today"}, nil
}

func TestAnEnvPolicyThatRefusesStartsNothing(t *testing.T) {
	a := run(t, context.Background(), map[string]any{"run": "echo ran"}, nil, denyEnv{})
	if a.res.Err == nil || !strings.Contains(a.res.Err.Error(), "no commands today") || len(a.procs.procs) != 0 {
		t.Errorf("result %v, processes %v; want the refusal and nothing started", a.res.Err, a.procs.procs)
	}
}

func TestCwdIsRelativeToTheWorkspaceAndCheckedBeforeTheSpawn(t *testing.T) {
	s, _ := shell.Kind{}.Prepare(steps.StepConfig{ID: "t", With: map[string]any{"run": "pwd", "cwd": "sub"}})
	ws := t.TempDir()
	inv := func() *steps.Invocation {
		return &steps.Invocation{StepID: "t", Workspace: ws, With: map[string]any{"run": "pwd", "cwd": "sub"},
			Ambient: map[string]string{"PATH": os.Getenv("PATH")}, Events: steps.Discard{}}
	}
	if r := s.Run(context.Background(), inv()); r.Err == nil || !strings.Contains(r.Err.Error(), filepath.Join(ws, "sub")+" does not exist") {
		t.Errorf("missing cwd: %v", r.Err)
	}
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if r := s.Run(context.Background(), inv()); r.Err != nil || r.Output != filepath.Join(ws, "sub")+"\n" {
		t.Errorf("cwd sub: output %q, error %v", r.Output, r.Err)
	}
}

func TestShellChoosesWhatRunsTheCommandLine(t *testing.T) {
	for _, tc := range []struct {
		shell, line, want string
	}{
		{"sh", "echo $0", "/sh\n"},
		{"bash", `test -n "$BASH_VERSION" && echo bash`, "bash\n"},
		{"python3", "print(6*7)", "42\n"},
		{"sh -e {0}", "echo from a script file: $0", "from a script file: /"},
	} {
		if tc.shell == "python3" {
			if _, err := os.Stat("/usr/bin/python3"); err != nil {
				continue
			}
		}
		a := run(t, context.Background(), map[string]any{"run": tc.line, "shell": tc.shell}, nil, nil)
		if a.res.Err != nil || !strings.Contains(a.res.Output, tc.want) {
			t.Errorf("shell %q: output %q, error %v; want %q", tc.shell, a.res.Output, a.res.Err, tc.want)
		}
		if script, ok := strings.CutPrefix(strings.TrimSpace(a.res.Output), "from a script file: "); ok {
			if _, err := os.Stat(script); !os.IsNotExist(err) {
				t.Errorf("the script file %s is left behind (%v)", script, err)
			}
		}
	}
	a := run(t, context.Background(), map[string]any{"run": "echo", "shell": "no-such-shell-here {0}"}, nil, nil)
	if a.res.Err == nil || !strings.Contains(a.res.Err.Error(), "no-such-shell-here not found in PATH") {
		t.Errorf("missing shell: %v", a.res.Err)
	}
}

func TestOutputPastTheLimitStopsTheCommandAndKeepsTheFirstPart(t *testing.T) {
	a := run(t, context.Background(), map[string]any{"run": "yes 0123456789"}, nil, nil)
	if a.res.Err == nil || !strings.Contains(a.res.Err.Error(), "more than 8 MiB") {
		t.Fatalf("error = %v; want the limit named", a.res.Err)
	}
	if len(a.res.Output) != steps.DefaultMaxOutput || !strings.HasPrefix(a.res.Output, "0123456789\n") {
		t.Errorf("output: %d bytes; want the first %d", len(a.res.Output), steps.DefaultMaxOutput)
	}
}

func TestPrepareRejectsBadValuesAtTheValue(t *testing.T) {
	for _, tc := range []struct {
		with map[string]any
		path string
	}{
		{map[string]any{"run": 1}, "with.run"},
		{map[string]any{"run": ""}, "with.run"},
		{map[string]any{"run": "x", "shell": "node"}, "with.shell"},
		{map[string]any{"run": "x", "env": map[string]any{"A": []any{1}}}, "with.env.A"},
		{map[string]any{"run": "x", "env": map[string]any{"A=B": "1"}}, "with.env.A=B"},
		{map[string]any{"run": "x", "cwd": ""}, "with.cwd"},
	} {
		_, err := shell.Kind{}.Prepare(steps.StepConfig{ID: "t", With: tc.with})
		var fe *steps.FieldError
		if !errors.As(err, &fe) || strings.Join(fe.Path, ".") != tc.path {
			t.Errorf("Prepare(%v) = %v; want a field error at %s", tc.with, err, tc.path)
		}
	}
}

// A command the run record cannot name is stopped at once and the step
// fails with the record's error: a crash would leave it unseen.
func TestACommandThatCannotBeRecordedIsStopped(t *testing.T) {
	recordErr = errors.New("store: record process: disk I/O error")
	t.Cleanup(func() { recordErr = nil })
	a := run(t, context.Background(), map[string]any{"run": "sleep 5; touch done"}, nil, nil)
	if a.res.StopReason != steps.Error || a.res.Err == nil || !strings.Contains(a.res.Err.Error(), "disk I/O error") {
		t.Fatalf("result: %s %v; want the record's error", a.res.StopReason, a.res.Err)
	}
	if _, err := os.Stat(filepath.Join(a.dir, "done")); err == nil {
		t.Error("the command ran to its end")
	}
}
