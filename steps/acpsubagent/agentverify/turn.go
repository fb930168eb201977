package agentverify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/acpflow/acpflow/internal/agentsetup"
	"github.com/acpflow/acpflow/internal/modelserver"
)

// check is one scripted turn: what the model asks the agent to do, and
// which tool kinds count as its asking.
type check struct {
	name string
	// script is what the model says and calls, for a turn in workspace ws.
	script func(ws string) modelserver.Script
	kinds  []string // a permission request of one of these kinds is the agent asking
	// policy and sandbox are the workflow's permission policy and the
	// agent's sandbox: key.
	policy, sandbox string
}

// checks are the turns that say whether the agent asks. Under permission:
// reject nothing they ask for runs.
var checks = []check{
	{name: "command", script: func(string) modelserver.Script {
		return modelserver.Script{{Say: "Running a command.", Shell: "echo acpflow-verify > verify-command.txt"}, {Say: "FINAL done"}}
	}, kinds: []string{"execute"}, policy: "reject"},
	// An absolute path: some agents refuse a relative one themselves.
	{name: "write", script: func(ws string) modelserver.Script {
		return modelserver.Script{{Say: "Writing a file.", Write: &modelserver.Write{Path: filepath.Join(ws, "verify-write.txt"), Content: "acpflow verify\n"}}, {Say: "FINAL done"}}
	}, kinds: []string{"edit"}, policy: "reject"},
	{name: "delete", script: func(string) modelserver.Script {
		return modelserver.Script{{Say: "Cleaning.", Shell: "rm -rf build"}, {Say: "FINAL done"}}
	}, kinds: []string{"execute", "delete"}, policy: "reject"},
}

// sandboxCheck is a turn that needs no tool, under sandbox: true.
var sandboxCheck = check{name: "sandbox", script: func(string) modelserver.Script { return modelserver.Script{{Say: "FINAL done"}} },
	policy: "reject", sandbox: "true"}

// turnResult is what one turn's result and events say.
type turnResult struct {
	status, err string
	requested   []string // the kinds of the permission requests the agent sent
	unasked     []string // "KIND COMMAND" of each call run unasked
	switches    []string // "FROM -> TO" of each mode (or option) set back
	tier        string
	exitMS      int64
	info        agentInfo
}

// asked reports whether the agent asked before the call c is about.
func (t turnResult) asked(c check) bool {
	for _, k := range t.requested {
		if slices.Contains(c.kinds, k) {
			return true
		}
	}
	return false
}

// turn runs c through acpflow on the preset's agent, pointed at a model
// server of its own, in a fresh directory that is removed afterwards.
func (v *verifier) turn(ctx context.Context, c check) (turnResult, error) {
	d, err := dir()
	if err != nil {
		return turnResult{}, err
	}
	defer os.RemoveAll(d)
	if err := os.MkdirAll(filepath.Join(d, "ws", "build"), 0o755); err != nil {
		return turnResult{}, err
	}
	srv, err := modelserver.Start(c.script(filepath.Join(d, "ws")))
	if err != nil {
		return turnResult{}, err
	}
	defer srv.Close()
	a, err := agentsetup.ForCommand(v.p.Name, v.path, filepath.Join(d, "home"), srv.URL())
	if err != nil {
		return turnResult{}, err
	}
	wf := filepath.Join(d, "verify.yaml")
	if err := os.WriteFile(wf, workflow(v.p.Name, a, c), 0o644); err != nil {
		return turnResult{}, err
	}
	out := filepath.Join(d, "result.json")
	ctx, cancel := context.WithTimeout(ctx, turnLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, v.o.Self, "run", wf, "--json", "--output", out,
		"--workspace", filepath.Join(d, "ws"), "--state", filepath.Join(d, "state.db"))
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.Env = isolated(d)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	if ctx.Err() != nil {
		return turnResult{}, fmt.Errorf("no result within %s", turnLimit)
	}
	t, err := readTurn(out, stdout.Bytes())
	if err != nil {
		return t, fmt.Errorf("%v (acpflow: %v: %s)", err, runErr, firstLine(stderr.String()))
	}
	return t, nil
}

// isolated is the environment of the acpflow that runs a turn: acpflow's
// own, with HOME and the XDG directories moved under d, so that neither
// it nor the agent touches the user's config directories, and no outer
// policy of the user's.
func isolated(d string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "HOME" || strings.HasPrefix(k, "XDG_") || k == "ACPFLOW_POLICY" {
			continue
		}
		env = append(env, kv)
	}
	home := filepath.Join(d, "home")
	return append(env, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"XDG_STATE_HOME="+filepath.Join(home, ".local", "state"), "XDG_CACHE_HOME="+filepath.Join(home, ".cache"),
		"XDG_DATA_HOME="+filepath.Join(home, ".local", "share"), "NO_COLOR=1")
}

// workflow is the one-step workflow of a check: the preset with the
// installed program as its command (so the preset's own args, env, files
// and mode apply, as for a user), agentsetup's env and auth.
func workflow(preset string, a agentsetup.Agent, c check) []byte {
	env := map[string]string{}
	for _, kv := range a.Env {
		k, val, _ := strings.Cut(kv, "=")
		env[k] = val
	}
	var b strings.Builder
	q := func(s string) string { j, _ := json.Marshal(s); return string(j) }
	fmt.Fprintf(&b, "name: verify-%s\nagents:\n  a:\n    preset: %s\n    command: %s\n    env:\n", preset, preset, q(a.Command))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		fmt.Fprintf(&b, "      %s: %s\n", k, q(env[k]))
	}
	if a.Auth != "" {
		fmt.Fprintf(&b, "    auth: %s\n", q(a.Auth))
	}
	if c.sandbox != "" {
		fmt.Fprintf(&b, "    sandbox: %s\n", c.sandbox)
	}
	// unasked: record keeps a turn going past a call run unasked, so that
	// each check sees its own question; the call is on the record anyway.
	fmt.Fprintf(&b, "policies:\n  permission: %s\n  unasked: record\nsteps:\n  - id: s\n    uses: acp-subagent\n    with: {agent: a, prompt: \"Run the script.\"}\n", c.policy)
	return []byte(b.String())
}
