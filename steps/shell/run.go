package shell

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/acpflow/acpflow/internal/bytesize"
	"github.com/acpflow/acpflow/internal/procgroup"
	"github.com/acpflow/acpflow/internal/termtext"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/confine"
	"github.com/acpflow/acpflow/steps/outputschema"
	"github.com/acpflow/acpflow/steps/redact"
)

// stderrLinesInError is how many of the command's last stderr lines a
// failed step's error carries, as an agent step's.
const stderrLinesInError = 10

// ladder is how a shell's group is torn down, once the shell has exited
// (what it left running in the background) or must stop (a timeout, a
// cancel). A command has no protocol to end by closing its stdin, so there
// is no EOF grace: SIGTERM to the group at once, then SIGKILL after an
// agent's term grace.
var ladder = procgroup.Ladder{TermGrace: steps.DefaultTermGrace}

// step is one prepared shell step: its command line and env: as the file
// writes them, whose ${{ }} each invocation renders one by one (what each
// produced is passed as data, or is a secret); the rest is in the
// rendered with: of each invocation.
type step struct {
	run string
	env map[string]any
	// sandbox is with.sandbox, when sandboxSet (nil: none, whatever the
	// workflow's default).
	sandbox    *steps.Sandbox
	sandboxSet bool
	// cwd is with.cwd as the file fixes it, when cwdSet ("": it has a
	// ${{ }}, rendered at run time).
	cwd    string
	cwdSet bool
	// output is with.output-schema, which stdout must match; nil: none.
	output *outputschema.Schema
}

var _ steps.StructuredStep = (*step)(nil)

// JSONShape implements steps.StructuredStep: the type output-schema gives
// the step's value; nil without one.
func (s *step) JSONShape() *steps.Shape {
	if s.output == nil {
		return nil
	}
	return s.output.Shape()
}

// Run implements steps.Step: resolve the cwd, ask the env policy, start
// the shell in its own process group with stdin closed, keep its stdout as
// the output and its stderr's tail, and tear the group down when the shell
// exits or ctx ends. A non-zero exit fails the step. Everything the step
// records passes its scrubber (secrets.go).
func (s *step) Run(ctx context.Context, inv *steps.Invocation) steps.Result {
	scrub := redact.New(nil, inv.Workspace)
	own := *inv
	if inv.Events != nil {
		own.Events = scrubbingSink{next: inv.Events, scrub: scrub}
	}
	res := s.attempt(ctx, &own, scrub)
	scrub.Result(&res)
	return res
}

// attempt runs the command, adding the secrets it learns to scrub.
func (s *step) attempt(ctx context.Context, inv *steps.Invocation, scrub *redact.Scrubber) steps.Result {
	if ctx.Err() != nil {
		return aborted(fmt.Errorf("the command was not started: %w", context.Cause(ctx)))
	}
	cwd, err := steps.ResolveCwd(inv, "")
	if err != nil {
		return failed(err)
	}
	scrub.KeepPaths(cwd)
	shellText, _ := inv.With["shell"].(string)
	line, values, err := s.commandLine(inv, shellText, scrub)
	if err != nil {
		return failed(err)
	}
	env, err := s.buildEnv(ctx, inv, cwd, scrub)
	if err != nil {
		return failed(err)
	}
	maps.Copy(env, values)
	cmd, err := commandFor(shellText, line)
	if err != nil {
		return failed(err)
	}
	if cmd.script != "" {
		defer os.Remove(cmd.script)
	}
	if ctx.Err() != nil {
		return aborted(fmt.Errorf("the command was not started: %w", context.Cause(ctx)))
	}
	spec := procgroup.Spec{
		Path: cmd.path, Args: cmd.args, Dir: cwd,
		OnDescendant: func(leader int, p procgroup.Proc) {
			inv.ProcessSeen(leader, p.PID, p.StartTicks)
			inv.Emit(Descendant{AgentPID: leader, PID: p.PID, PGID: p.PGID, StartTicks: p.StartTicks})
		},
	}
	c, record, err := s.sandboxCommand(inv, cwd, env, &spec)
	if err != nil {
		return failed(err)
	}
	if c != nil {
		defer c.Release()
	}
	spec.Env = policies.EnvList(env)
	child, err := c.Start(spec)
	if err != nil {
		res := failed(fmt.Errorf("cannot start %s: %w", cmd.path, err))
		res.Sandbox = record
		return res
	}
	c.Attach(child.Pid())
	// On record before it is announced: if acpflow dies from here on,
	// resume can find the group.
	if err := inv.ProcessStarted(child.Pid(), child.StartTicks()); err != nil {
		child.Kill()
		child.Teardown(ladder)
		inv.ProcessEnded(child.Pid(), 0)
		return failed(err)
	}
	inv.Emit(Spawned{PID: child.Pid(), StartTicks: child.StartTicks(), Cwd: cwd, Shell: cmd.path})
	// The command reads no input: a test that waits for a terminal ends
	// at once instead of hanging the step.
	child.Stdin().Close()

	out, err := readOutput(child.Stdout(), steps.DefaultMaxOutput, inv, scrub)
	if err != nil {
		child.Kill()
		child.Teardown(ladder)
		inv.ProcessEnded(child.Pid(), 0)
		return failed(fmt.Errorf("cannot read the command's output: %w", err))
	}
	res := settle(ctx, inv, child, out)
	res = s.checked(res)
	if c != nil {
		record = c.Record()
	}
	res.Sandbox = record
	return res
}

// sandboxCommand wraps the command in its sandbox (docs/sandbox.md), setting how
// spec starts it, and sets TMPDIR (and a host list's proxy) in env: the
// step's with.sandbox, else the workflow's, under the outer policy. It
// returns the confinement to release once the group is gone (nil for
// none) and the record the result starts with: a sandbox the kernel
// cannot enforce, under required: false, runs the command unconfined
// with a warning.
func (s *step) sandboxCommand(inv *steps.Invocation, cwd string, env map[string]string, spec *procgroup.Spec) (*confine.Confinement, *steps.SandboxRecord, error) {
	sb := inv.Sandbox
	if s.sandboxSet {
		sb = s.sandbox
	}
	if sb = confine.Effective(sb, inv.Outer); sb == nil {
		return nil, nil, nil
	}
	r := confine.Request{Who: "step " + inv.StepID, Sandbox: sb, Cwd: cwd, Workspace: inv.Workspace, StateFiles: inv.StateFiles}
	return confine.Wrap(r, env, spec.Path, spec.Args, inv.Emit)
}

// settle waits for the shell to exit (or ctx to end, or its output to
// pass the limit), tears its group down, and makes the step's result of
// how it ended.
func settle(ctx context.Context, inv *steps.Invocation, child *procgroup.Child, out *output) steps.Result {
	var stopped error // why acpflow stopped the command, if it did
	select {
	case <-child.Exited():
	case <-ctx.Done():
	case <-out.full:
	}
	select {
	case <-child.Exited():
	default:
		if ctx.Err() != nil {
			stopped = context.Cause(ctx)
		} else {
			stopped = fmt.Errorf("the command wrote more than %s to stdout (the limit of a step's output); it was stopped, and the output keeps the first %s",
				bytesize.Format(steps.DefaultMaxOutput), bytesize.Format(steps.DefaultMaxOutput))
		}
	}
	rep := child.Teardown(ladder)
	inv.ProcessEnded(child.Pid(), rep.Descendants)
	td := Teardown{PID: child.Pid(), Tier: rep.Tier, Exit: rep.Exit, DurationMS: rep.Duration.Milliseconds(),
		EscapedKilled: rep.Escaped, Descendants: rep.Descendants}
	if rep.Err != nil {
		td.Error = rep.Err.Error()
	}
	inv.Emit(td)
	output, overflowed := out.wait()
	if overflowed && stopped == nil {
		// The shell exited as its output passed the limit.
		stopped = fmt.Errorf("the command wrote more than %s to stdout (the limit of a step's output); the output keeps the first %s",
			bytesize.Format(steps.DefaultMaxOutput), bytesize.Format(steps.DefaultMaxOutput))
	}

	res := steps.Result{Output: output, Final: output, Stderr: child.Stderr().String()}
	switch {
	case stopped != nil && ctx.Err() != nil:
		res.StopReason, res.Err = steps.Aborted, stopped
	case stopped != nil:
		res.StopReason, res.Err = steps.Error, stopped
	default:
		code, signal := exitOf(child.ExitErr())
		res.ExitCode = &code
		inv.Emit(Exited{ExitCode: code, Signal: signal})
		switch {
		case code == 0:
			res.StopReason = steps.Completed
		case signal != "":
			res.StopReason, res.Err = steps.Error, fmt.Errorf("the command was killed by %s (exit code %d)", signal, code)
		default:
			res.StopReason, res.Err = steps.Error, fmt.Errorf("the command exited with code %d", code)
		}
	}
	if res.Err != nil {
		if tail := termtext.StripANSI(child.Stderr().LastLines(stderrLinesInError)); tail != "" {
			res.Err = fmt.Errorf("%w\nstderr (last lines):\n%s", res.Err, indent(tail))
		}
	}
	return res
}

// checked is res with output-schema's verdict on the stdout of a command
// that succeeded: its value (the whole stdout as JSON, else its last
// ```json block), or a failed step saying what does not match.
func (s *step) checked(res steps.Result) steps.Result {
	if res.StopReason != steps.Completed || s.output == nil {
		return res
	}
	value, wrong := s.output.Check(res.Output)
	if wrong != nil {
		res.StopReason = steps.Error
		res.Err = fmt.Errorf("stdout does not match with.output-schema: %s", strings.Join(wrong, "; "))
		return res
	}
	res.JSON = value
	return res
}

func aborted(err error) steps.Result { return steps.Result{StopReason: steps.Aborted, Err: err} }
func failed(err error) steps.Result  { return steps.Result{StopReason: steps.Error, Err: err} }

// exitOf reads a shell's exit: its code, or for one killed by a signal,
// 128 + the signal and the signal's name.
func exitOf(err error) (code int, signal string) {
	if err == nil {
		return 0, ""
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), unix.SignalName(ws.Signal())
		}
		return ee.ExitCode(), ""
	}
	return -1, ""
}

// buildEnv asks the env policy, within the outer policy, for the command's
// environment, failing closed: the step's env: values are the explicit
// ones, set on top of what the policy keeps of acpflow's environment (as
// an agent step's with.env is; a shell step has no agent env under it).
// The secrets among them go to scrub first, as an agent step's do: what a
// ${{ }} produced in env:, and credentials by name.
func (s *step) buildEnv(ctx context.Context, inv *steps.Invocation, cwd string, scrub *redact.Scrubber) (map[string]string, error) {
	explicit := map[string]string{}
	if env, ok := inv.With["env"].(map[string]any); ok {
		for k, v := range env {
			explicit[k] = fmt.Sprint(v)
		}
	}
	var secrets []string
	for k, v := range s.env {
		if raw, ok := v.(string); ok && strings.Contains(raw, "${{") && inv.Render != nil {
			pieces, err := redact.RenderPieces(raw, inv.Render)
			if err != nil {
				return nil, fmt.Errorf("env.%s: %w", k, err)
			}
			secrets = append(secrets, redact.Produced(pieces)...)
		}
	}
	secrets = append(secrets, redact.CredentialValues(explicit)...)
	scrub.Add(append(secrets, redact.CredentialValues(inv.Ambient)...))
	req := &policies.EnvRequest{
		Request: policies.Request{Kind: "env", Workflow: inv.Workflow, RunID: inv.RunID, Step: inv.StepID,
			Workspace: inv.Workspace, Cwd: cwd},
		Ambient:  inv.Ambient,
		Explicit: explicit,
	}
	dec, err := inv.Outer.BuildEnv(ctx, inv.Env, req)
	if err := refusal(inv, dec, err); err != nil {
		// The policy's reason may quote any value it saw.
		saw := append(slices.Collect(maps.Values(req.Ambient)), slices.Collect(maps.Values(req.Explicit))...)
		return nil, redact.New(saw, inv.Workspace, cwd).Err(err)
	}
	if dec.Env == nil {
		dec.Env = map[string]string{}
	}
	// A module may add or change values: its credentials are secrets too.
	scrub.Add(redact.CredentialValues(dec.Env))
	// PWD names the command's directory unless the workflow set it:
	// inherited, it would name acpflow's, and shells trust it.
	if _, set := explicit["PWD"]; !set {
		dec.Env["PWD"] = cwd
	}
	inv.Emit(Env{Policy: string(inv.EnvSource), Rule: dec.Rule, Names: len(dec.Env), PolicyStderr: dec.Stderr, Outer: dec.Outer})
	return dec.Env, nil
}

// refusal is why the env policy gave the command no environment (nil:
// it gave one).
func refusal(inv *steps.Invocation, dec policies.EnvDecision, err error) error {
	var refused *policies.OuterEnvError
	if errors.As(err, &refused) {
		switch refused.SetBy {
		case policies.SetByExplicit:
			refused.SetBy = "step " + inv.StepID + "'s env"
		case policies.SetByPolicy:
			refused.SetBy = fmt.Sprintf("the env policy (%s)", inv.EnvSource)
		}
		return refused
	}
	if err != nil {
		return fmt.Errorf("env policy (%s) failed, nothing was started: %w", inv.EnvSource, err)
	}
	if dec.Deny != "" {
		return fmt.Errorf("env policy (%s) refused the spawn: %s", inv.EnvSource, dec.Deny)
	}
	return nil
}

// output collects a command's stdout, the first limit bytes of it.
type output struct {
	r     *os.File
	limit int
	full  chan struct{} // closed once past the limit
	done  chan struct{} // closed at the end of stdout

	mu        sync.Mutex
	buf       []byte
	overflown bool

	// held is what was kept but not yet reported: it may end in the
	// beginning of a secret (redact.Scrubber.Cut). Only the reading
	// goroutine touches it.
	held  string
	scrub *redact.Scrubber
}

// readOutput reads stdout until its end, from a duplicate of its
// descriptor: the teardown closes the child's own once the group is gone,
// and what the command wrote last may not have been read by then. The
// reading ends when every writer is gone (the teardown sees to that).
func readOutput(stdout *os.File, limit int, inv *steps.Invocation, scrub *redact.Scrubber) (*output, error) {
	raw, err := stdout.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd, derr := -1, error(nil)
	if err := raw.Control(func(f uintptr) { fd, derr = unix.FcntlInt(f, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, derr
	}
	o := &output{r: os.NewFile(uintptr(fd), "stdout"), limit: limit, full: make(chan struct{}), done: make(chan struct{}), scrub: scrub}
	go o.read(inv)
	return o, nil
}

func (o *output) read(inv *steps.Invocation) {
	defer close(o.done)
	defer o.r.Close()
	chunk := make([]byte, 32<<10)
	for {
		n, err := o.r.Read(chunk)
		if n > 0 {
			o.add(chunk[:n], inv)
		}
		if err != nil {
			if o.held != "" {
				inv.Emit(Stdout{Text: o.held})
			}
			return
		}
	}
}

// add keeps what fits under the limit and reports it; past the limit the
// rest is read and dropped, so that the command is not blocked writing
// while it is stopped.
func (o *output) add(p []byte, inv *steps.Invocation) {
	o.mu.Lock()
	room := o.limit - len(o.buf)
	kept := p[:max(0, min(len(p), room))]
	o.buf = append(o.buf, kept...)
	if len(p) > len(kept) && !o.overflown {
		o.overflown = true
		close(o.full)
	}
	o.mu.Unlock()
	if len(kept) > 0 {
		o.held += string(kept)
		if cut := o.scrub.Cut(o.held); cut > 0 {
			inv.Emit(Stdout{Text: o.held[:cut]})
			o.held = o.held[cut:]
		}
	}
}

// readGrace bounds the wait for the end of stdout once the group is gone:
// only a writer that escaped the teardown can hold it open.
const readGrace = time.Second

// wait returns what was kept, and whether the command wrote more, once
// stdout has ended (or readGrace after the teardown, if an escaped writer
// holds it).
func (o *output) wait() (string, bool) {
	select {
	case <-o.done:
	case <-time.After(readGrace):
		o.r.Close()
		<-o.done
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return string(o.buf), o.overflown
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}

var _ steps.SandboxChecker = (*step)(nil)

// CheckSandbox implements steps.SandboxChecker: the command's sandbox
// (with.sandbox, else the workflow's, under the outer policy) against its
// cwd as the file fixes it (with.cwd without ${{ }}, else the workspace)
// and its write: entries, with the HOME its env: fixes, else acpflow's.
func (s *step) CheckSandbox(c steps.SandboxCheck) error {
	sb := c.Sandbox
	if s.sandboxSet {
		sb = s.sandbox
	}
	if sb = confine.Effective(sb, c.Outer); sb == nil {
		return nil
	}
	if sb.Network == steps.NetworkGateway { // the workflow's: the step's own is refused when read
		return steps.FieldErrorf(nil, "the workflow's sandbox has network: gateway, and a shell step has no model gateway to reach; give this step its own sandbox: (network: off for no network)")
	}
	cwd := c.Workspace
	if s.cwdSet {
		cwd = s.cwd // "" when rendered at run time: checked at the spawn
	}
	if cwd != "" && !filepath.IsAbs(cwd) {
		cwd = filepath.Join(c.Workspace, cwd)
	}
	home, _ := s.env["HOME"].(string)
	if strings.Contains(home, "${{") {
		home = ""
	}
	r := confine.Request{Who: "the command", Sandbox: sb, Cwd: cwd, Workspace: c.Workspace, Home: home, StateFiles: c.StateFiles}
	err := r.Check()
	var pe *confine.PathError
	if !errors.As(err, &pe) {
		return err
	}
	var at []string // the step: the workflow's sandbox, or its workspace
	switch {
	case pe.Key == "cwd" && s.cwdSet:
		at = steps.WithPath("cwd")
	case pe.Key == "write" && s.sandboxSet:
		at = steps.WithPath("sandbox", "write")
	}
	return &steps.FieldError{Path: at, Err: err}
}
