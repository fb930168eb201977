package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/acpflow/acpflow/cli"
	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/internal/termtext"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
	"github.com/acpflow/acpflow/workflows"
)

// promptStep is the one step of a prompt's workflow: its output is the
// answer printed.
const promptStep = "prompt"

// runFlagsOfPrompt are the flags of run that prompt takes as they are:
// the same flag objects, so that their help, defaults and checks cannot
// drift from run's. The batch flags (--input, --inputs, --concurrency,
// --budget) have no meaning for one prompt.
var runFlagsOfPrompt = []string{"workspace", "timeout", "sandbox", "state", "policy", "output", "json"}

// envName is a variable a template can name as env.NAME.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// newPromptCmd is `acpflow prompt`: one acp-subagent step with no
// workflow file to write. It writes the workflow itself, as a small YAML
// file in the run store's directory, and runs it through run's own
// command (cli), so that the loader checks it and the run gets run's
// policies, views, record, --output and exit codes; the file stays so
// that `acpflow resume` can read it again. The prompt text is the
// workflow's input, not part of the file: it is recorded with the run as
// any input is, and no text of the user's is ever read as YAML or as a
// template.
func newPromptCmd() *cobra.Command {
	var (
		permission string
		auth       string
		mode       string
		env        []string
	)
	kept := &keepResult{}
	run := cli.New(promptRun(kept))
	cmd := &cobra.Command{
		Use:   "prompt AGENT TEXT",
		Short: "Send one prompt to an agent (a preset, demo, or any ACP command) and print its answer: a one-step run, recorded like any other",
		Long: `AGENT is a preset (acpflow agents lists them) or demo (the built-in offline agent);
any other ACP agent is -- COMMAND [ARGS...], with TEXT last (acpflow prompt -- COMMAND
[ARGS...] TEXT) or first (acpflow prompt TEXT -- COMMAND [ARGS...]). TEXT - reads the prompt
from stdin.

The agent's answer is printed on stdout once the run succeeded; the run's progress goes to
stderr. With --json the event stream, with --output - the result line, is stdout's instead.
The run is one acp-subagent step, recorded like any other (acpflow runs, show, resume) under
the workflow name prompt-AGENT, with run's exit codes. Its permission policy is --permission
(default ask: you answer at the terminal; without one, the request is rejected), under
--policy FILE and the outer policies. A preset's credential variables (ANTHROPIC_API_KEY for
claude, …) are passed to the agent when they are set; --env NAME passes others. When the agent
fails for want of one, the likely cause says what to export (docs/acp-subagent.md).`,
		Example: `  acpflow prompt demo "Say hello"
  acpflow prompt claude "Summarise README.md in three lines" --permission reject
  git diff | acpflow prompt codex - --auth api-key
  acpflow prompt "Say hello" -- acpflow agent demo
  acpflow prompt -- acpflow agent demo "Say hello"
  acpflow prompt demo "tool: execute rm -rf build" --permission reject --json`,
		Args: func(c *cobra.Command, args []string) error {
			dash := c.ArgsLenAtDash()
			switch {
			case dash == 0 && len(args) < 2:
				return cli.ArgsError(c, "missing COMMAND or TEXT after --: acpflow prompt -- COMMAND [ARGS...] TEXT")
			case dash > 1:
				return cli.ArgsError(c, fmt.Sprintf("unexpected argument %q before -- (it takes TEXT -- COMMAND [ARGS...])", args[1]))
			case dash == 1 && len(args) == 1:
				return cli.ArgsError(c, "missing COMMAND after --")
			case dash < 0 && len(args) == 0:
				return cli.ArgsError(c, "missing AGENT (a preset: see acpflow agents; demo; or TEXT -- COMMAND [ARGS...])")
			case dash < 0 && len(args) == 1:
				return cli.ArgsError(c, "missing TEXT (the prompt; - reads it from stdin)")
			case dash < 0 && len(args) > 2:
				return cli.ArgsError(c, fmt.Sprintf("unexpected argument %q (it takes AGENT TEXT; quote the prompt)", args[2]))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			p := promptSpec{permission: permission, auth: auth, mode: mode, env: env}
			text := args[0]
			switch dash := c.ArgsLenAtDash(); dash {
			case 0: // -- COMMAND [ARGS...] TEXT, the spec's AGENT TEXT with AGENT "-- COMMAND ARGS"
				p.command, text = args[:len(args)-1], args[len(args)-1]
			case 1: // TEXT -- COMMAND [ARGS...]
				p.command = args[1:]
			default:
				p.agent, text = args[0], args[1]
			}
			return runPrompt(c, run, kept, p, text)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&permission, "permission", "ask", "the permission policy, a decision: ask (a person at the terminal; elsewhere reject), allow, allow_always, reject, reject_always or cancel; --policy FILE adds rules")
	fl.StringVar(&auth, "auth", "", "the authenticate method to call after initialize (e.g. api-key for codex; see acpflow probe)")
	fl.StringVar(&mode, "mode", "", "the session mode to set (default: the preset's)")
	fl.StringArrayVar(&env, "env", nil, "pass the variable NAME of acpflow's environment to the agent (repeatable); credentials are not passed otherwise")
	for _, name := range runFlagsOfPrompt {
		fl.AddFlag(run.Flags().Lookup(name))
	}
	return cmd
}

// promptSpec is what a prompt's workflow is made of.
type promptSpec struct {
	agent      string   // a preset or demo; "" with command
	command    []string // -- COMMAND ARGS
	permission string
	auth       string
	mode       string
	env        []string
}

// promptRun is run's backend for a prompt: the local one, the run's
// result kept in kept for the answer. The user wrote no YAML: what the
// agent's failures advise is in shell terms (steps.Agent.ShellAdvice),
// and the warnings of the workflow prompt wrote are not shown (they would
// speak of its keys; the step's error says what to export).
func promptRun(kept *keepResult) cli.Config {
	c := localRun
	c.Warnings = false
	c.Open = func(ctx context.Context, s cli.Setup) (*runs.Runner, func(), error) {
		for _, a := range s.Workflow.Agents {
			a.ShellAdvice = true
		}
		r, end, err := openLocal(ctx, s)
		if err == nil {
			kept.inner, r.Backend = r.Backend, kept
		}
		return r, end, err
	}
	return c
}

// keepResult is a backend that keeps the result of the run it ran (one:
// a prompt is never a batch).
type keepResult struct {
	inner runs.Backend
	res   *engine.RunResult
}

func (k *keepResult) Run(ctx context.Context, wf *engine.Workflow, req runs.Request) (*engine.RunResult, error) {
	inner := k.inner
	if inner == nil {
		inner = runs.Local{}
	}
	res, err := inner.Run(ctx, wf, req)
	k.res = res
	return res, err
}

// runPrompt writes the prompt's workflow, runs it through run's command
// and prints the answer.
func runPrompt(c, run *cobra.Command, kept *keepResult, p promptSpec, text string) error {
	if text == "-" {
		b, err := io.ReadAll(io.LimitReader(os.Stdin, workflows.MaxFileSize+1))
		if err != nil {
			return cli.UsageErrorf("read the prompt from stdin: %v", err)
		}
		if len(b) > workflows.MaxFileSize {
			return cli.UsageErrorf("the prompt on stdin is longer than %d bytes", workflows.MaxFileSize)
		}
		text = string(b)
	}
	if strings.TrimSpace(text) == "" {
		return cli.UsageErrorf("the prompt is empty")
	}
	src, name, err := p.workflow()
	if err != nil {
		return cli.UsageError(err)
	}
	file, err := writePromptWorkflow(run.Flags().Lookup("state").Value.String(), name, src)
	if err != nil {
		return &cli.ExitError{Code: cli.ExitFailed, Err: err}
	}
	if err := run.Flags().Set("input", "prompt="+text); err != nil {
		return cli.UsageError(err)
	}
	// The answer is stdout's and the progress goes to stderr, as acpx and
	// curl do; but the event stream of --json, or the results of
	// --output -, are what a program reads on stdout, the answer among them
	// (run itself moves its view to stderr for --output -).
	machine := run.Flags().Lookup("json").Value.String() == "true" || run.Flags().Lookup("output").Value.String() == "-"
	run.SetContext(c.Context())
	run.SetErr(c.ErrOrStderr())
	if machine {
		run.SetOut(c.OutOrStdout())
	} else {
		run.SetOut(c.ErrOrStderr())
	}
	if err := run.RunE(run, []string{file}); err != nil || machine {
		return err
	}
	if kept.res == nil || kept.res.Steps[promptStep] == nil {
		return nil
	}
	answer, _ := kept.res.Steps[promptStep].Output.(string)
	out := c.OutOrStdout()
	if writesToTerminal(out) {
		// An agent's text must not drive the terminal; piped, it is
		// written as the agent sent it.
		answer = termtext.Sanitize(answer)
	}
	if answer != "" && !strings.HasSuffix(answer, "\n") {
		answer += "\n"
	}
	_, err = io.WriteString(out, answer)
	return err
}

// writesToTerminal reports whether w is a terminal (stdout reaches the
// commands through a guard that has its Fd).
func writesToTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

// launchers are commands that start the agent named by their first
// argument that is not a flag (npx -y @github/copilot): the agent of
// `prompt -- COMMAND` is named after that argument instead.
var launchers = map[string]bool{"npx": true, "bunx": true, "pnpx": true, "uvx": true, "pipx": true, "node": true, "bun": true, "deno": true, "python": true, "python3": true, "env": true}

// commandAgentName names the agent of `prompt -- COMMAND ARGS…` after its
// command (copilot, not "agent"), so that what the run prints ("agent
// copilot ran …") and its workflow's name say which agent it was.
func commandAgentName(command []string) string {
	name := filepath.Base(command[0])
	if launchers[name] {
		for _, a := range command[1:] {
			if !strings.HasPrefix(a, "-") && !strings.Contains(a, "=") {
				name = a
				break
			}
		}
	}
	if at := strings.LastIndex(name, "@"); at > 0 {
		name = name[:at] // a package's version
	}
	name = filepath.Base(name)
	name = strings.TrimSuffix(name, filepath.Ext(name))
	clean := strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			return r
		}
		return '-'
	}, name)
	if clean == "" || !(unicode.IsLetter(rune(clean[0])) || clean[0] == '_') {
		return "agent"
	}
	return clean
}

// workflow is the prompt's workflow file and its name: prompt-AGENT.
func (p promptSpec) workflow() (src []byte, name string, err error) {
	if _, err := policies.ParseDecision(p.permission); err != nil {
		return nil, "", fmt.Errorf("--permission: %w", err)
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	var agent strings.Builder
	passed := map[string]bool{}
	agentName := p.agent
	switch {
	case p.command != nil:
		agentName = commandAgentName(p.command)
		fmt.Fprintf(&agent, "    command: %s\n", q(p.command[0]))
		args := make([]string, 0, len(p.command)-1)
		for _, a := range p.command[1:] {
			args = append(args, q(a))
		}
		fmt.Fprintf(&agent, "    args: [%s]\n", strings.Join(args, ", "))
	case p.agent == "demo":
		agent.WriteString("    builtin: demo\n")
	default:
		pr, ok := acpagent.LookupPreset(p.agent)
		if !ok {
			return nil, "", unknownAgent(p.agent)
		}
		fmt.Fprintf(&agent, "    preset: %s\n", q(pr.Name))
		// The preset's credentials are dropped by the env policy's
		// credential rule unless passed on purpose: prompt passes those
		// that are set, as a workflow using the preset would.
		for _, v := range pr.Env {
			if os.Getenv(v) != "" {
				passed[v] = true
			}
		}
	}
	for _, v := range p.env {
		if !envName.MatchString(v) {
			return nil, "", fmt.Errorf("--env %q: want the NAME of a variable of acpflow's environment (export it first; a value is never written to the run's files)", v)
		}
		passed[v] = true
	}
	if p.auth != "" {
		fmt.Fprintf(&agent, "    auth: %s\n", q(p.auth))
	}
	if p.mode != "" {
		fmt.Fprintf(&agent, "    mode: %s\n", q(p.mode))
	}
	if len(passed) > 0 {
		names := make([]string, 0, len(passed))
		for v := range passed {
			names = append(names, v)
		}
		sort.Strings(names)
		agent.WriteString("    env:\n")
		for _, v := range names {
			fmt.Fprintf(&agent, "      %s: ${{ env.%s }}\n", v, v)
		}
	}
	name = "prompt-" + agentName
	src = fmt.Appendf(nil, `# Written by acpflow prompt for its runs; acpflow resume reads it again.
name: %s
inputs:
  prompt: {type: string, required: true, description: the prompt}
policies:
  permission: %s
agents:
  %s:
%ssteps:
  - id: %s
    uses: acp-subagent
    with:
      agent: %s
      prompt: ${{ inputs.prompt }}
`, name, p.permission, agentName, agent.String(), promptStep, agentName)
	return src, name, nil
}

// unknownAgent is the error of an AGENT that is no preset, with those
// there are.
func unknownAgent(name string) error {
	known := []string{"demo"}
	for _, p := range acpagent.Presets() {
		known = append(known, p.Name)
	}
	msg := fmt.Sprintf("unknown agent %q: want a preset (%s), or TEXT -- COMMAND [ARGS...] for any ACP agent", name, strings.Join(known, ", "))
	if name == "replay" {
		msg += "; a replay needs its transcript: write a workflow with builtin: replay (docs/transcripts.md#replay)"
	}
	return errors.New(msg)
}

// writePromptWorkflow keeps a prompt's workflow beside the run store
// (state: --state, or where the store is by default), named by its
// content so that the same agent and flags reuse one file and a recorded
// run's file never changes under it (resume checks its hash).
func writePromptWorkflow(state, name string, src []byte) (string, error) {
	if state == "" {
		var err error
		if state, err = runs.DefaultPath(); err != nil {
			return "", err
		}
	}
	dir, err := filepath.Abs(filepath.Join(filepath.Dir(state), "prompts"))
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("write the prompt's workflow: %w", err)
	}
	sum := sha256.Sum256(src)
	file := filepath.Join(dir, name+"-"+hex.EncodeToString(sum[:8])+".yaml")
	if have, err := os.ReadFile(file); err == nil && string(have) == string(src) {
		return file, nil
	}
	tmp, err := os.CreateTemp(dir, ".prompt-*")
	if err != nil {
		return "", fmt.Errorf("write the prompt's workflow: %w", err)
	}
	_, werr := tmp.Write(src)
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), file)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("write the prompt's workflow: %w", werr)
	}
	return file, nil
}
