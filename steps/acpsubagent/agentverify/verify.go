// Package agentverify is `acpflow agents verify`: it drives each preset's
// installed agent through scripted, offline turns against a local model
// server (internal/modelserver), through acpflow itself (`acpflow run` of a
// one-step workflow on the preset), and compares what the agent did with
// what the preset states it does (acpagent.Preset.Expect). Agents change
// under a preset with every release; this is how a user who upgrades one
// learns that it no longer asks, without a key or the network.
//
// # Notes
//
// Every turn runs in a directory of its own with a fresh HOME, and the
// acpflow it starts gets that HOME and XDG directories too, so nothing is
// read from or written to the user's config directories. acpflow's own
// teardown ends each agent's process group; Verify starts no agent itself.
package agentverify

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/acpflow/acpflow/internal/agentsetup"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// Report is what Verify found of one preset's agent.
type Report struct {
	Preset string `json:"preset"`
	// Installed is false when the preset's program is not on PATH: reported,
	// never a failure.
	Installed bool   `json:"installed"`
	Command   string `json:"command,omitempty"`
	Agent     string `json:"agent,omitempty"`
	Version   string `json:"version,omitempty"`
	// StartMode is the mode session/new reports, before acpflow sets its own.
	StartMode string `json:"start_mode,omitempty"`
	// Asks says, for "command", "write" and "delete", whether the agent
	// asked acpflow before it.
	Asks map[string]bool `json:"asks,omitempty"`
	// Unasked are the tool calls it ran without asking, as "KIND COMMAND".
	Unasked []string `json:"unasked"`
	// WideningOptions are its config options that can let it decide alone
	// (Copilot's allow_all), as "ID=VALUE".
	WideningOptions []string `json:"widening_options"`
	// ModeSwitches are the switches it made on its own during a turn, each
	// set back by acpflow's mode guard ("FROM -> TO").
	ModeSwitches []string `json:"mode_switches"`
	// Teardown is how it ended after the turn (tier eof: it exited on
	// stdin EOF) and ExitMS how long after the turn's end.
	Teardown string `json:"teardown,omitempty"`
	ExitMS   int64  `json:"exit_ms,omitempty"`
	// Sandbox says whether a turn under sandbox: true completed ("ok"),
	// else why not.
	Sandbox string `json:"sandbox,omitempty"`
	// Changed names each way the agent no longer behaves as its preset
	// expects; empty when it does.
	Changed []string `json:"changed"`
	// Error is what kept a check from running at all.
	Error string `json:"error,omitempty"`
}

// Clean reports whether the agent behaves as its preset expects (or is
// not installed).
func (r Report) Clean() bool { return !r.Installed || (len(r.Changed) == 0 && r.Error == "") }

// Options say what Verify runs.
type Options struct {
	// Self is the acpflow binary that runs the turns.
	Self string
	// Presets are the preset names to verify; nil: every preset Verify
	// knows how to drive (agentsetup).
	Presets []string
	// Progress, when set, hears of each check as it starts.
	Progress func(preset, check string)
}

// Verifiable lists the presets Verify can drive offline.
func Verifiable() []string {
	var out []string
	for _, p := range acpagent.Presets() {
		if agentsetup.Known(p.Name) {
			out = append(out, p.Name)
		}
	}
	return out
}

// Verify checks each preset's installed agent and reports on each, in the
// order asked. An unknown preset is an error before anything runs.
func Verify(ctx context.Context, o Options) ([]Report, error) {
	names := o.Presets
	if len(names) == 0 {
		names = Verifiable()
	}
	for _, n := range names {
		if !slices.Contains(Verifiable(), n) {
			return nil, fmt.Errorf("unknown preset %q: verify knows %s", n, strings.Join(Verifiable(), ", "))
		}
	}
	var out []Report
	for _, n := range names {
		p, _ := acpagent.LookupPreset(n)
		out = append(out, verifyPreset(ctx, o, p))
	}
	return out, nil
}

// verifyPreset runs every check on one preset's agent.
func verifyPreset(ctx context.Context, o Options, p acpagent.Preset) Report {
	r := Report{Preset: p.Name, Asks: map[string]bool{}, Unasked: []string{}, WideningOptions: []string{}, ModeSwitches: []string{}, Changed: []string{}}
	path, err := exec.LookPath(p.Bin)
	if err != nil {
		return r // not installed
	}
	r.Installed, r.Command = true, path
	v := &verifier{o: o, p: p, path: path, r: &r}
	v.run(ctx)
	r.Changed = compare(p, r)
	return r
}

// verifier holds one preset's checks.
type verifier struct {
	o    Options
	p    acpagent.Preset
	path string
	r    *Report
}

func (v *verifier) progress(check string) {
	if v.o.Progress != nil {
		v.o.Progress(v.p.Name, check)
	}
}

// run does the checks in order: a command, a write and a delete under
// permission: reject, and a turn under sandbox: true.
func (v *verifier) run(ctx context.Context) {
	for _, c := range checks {
		v.progress(c.name)
		t, err := v.turn(ctx, c)
		if err != nil {
			v.r.Error = fmt.Sprintf("%s: %v", c.name, err)
			return
		}
		v.r.Asks[c.name] = t.asked(c)
		v.note(t)
	}
	v.progress("sandbox")
	t, err := v.turn(ctx, sandboxCheck)
	switch {
	case err != nil:
		v.r.Sandbox = err.Error()
	case t.status != "succeeded":
		v.r.Sandbox = "the turn did not complete: " + firstLine(t.err)
	default:
		v.r.Sandbox = "ok"
	}
}

// note keeps what any turn showed: calls run unasked, mode switches, how
// the agent ended.
func (v *verifier) note(t turnResult) {
	for _, u := range t.unasked {
		if !slices.Contains(v.r.Unasked, u) {
			v.r.Unasked = append(v.r.Unasked, u)
		}
	}
	for _, s := range t.switches {
		if !slices.Contains(v.r.ModeSwitches, s) {
			v.r.ModeSwitches = append(v.r.ModeSwitches, s)
		}
	}
	if v.r.Agent == "" {
		v.r.Agent, v.r.Version, v.r.StartMode = t.info.name, t.info.version, t.info.startMode
		v.r.WideningOptions = append(v.r.WideningOptions, t.info.widening...)
	}
	if v.r.Teardown == "" && t.tier != "" {
		v.r.Teardown, v.r.ExitMS = t.tier, t.exitMS
	}
}

// dir makes a fresh directory for one turn, with a workspace and a HOME.
func dir() (string, error) {
	d, err := os.MkdirTemp("", "acpflow-verify-")
	if err != nil {
		return "", err
	}
	for _, sub := range []string{"ws", "home"} {
		if err := os.Mkdir(filepath.Join(d, sub), 0o755); err != nil {
			os.RemoveAll(d)
			return "", err
		}
	}
	return d, nil
}

// turnLimit bounds one acpflow run of a check.
const turnLimit = 3 * time.Minute

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
