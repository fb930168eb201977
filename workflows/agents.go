package workflows

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/acpflow/acpflow/internal/replayagent"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

var (
	agentKeys   = []string{"builtin", "from", "command", "args", "env", "cwd", "auth", "preset", "mode", "config", "mcp-servers", "max-output", "reuse", "sandbox", "gateway", "start-timeout", "dispose"}
	disposeKeys = []string{"eof-grace", "eof-idle", "term-grace"}
)

func (d *decoder) decodeAgents(n *node) {
	if !d.mapping(n, "agents") {
		return
	}
	d.wf.Agents = map[string]*steps.Agent{}
	for i, k := range n.keys {
		name := k.value.(string)
		if !namePattern.MatchString(name) {
			d.at(k.pos, "agent name %q: use letters, digits, _ and -, starting with a letter or _", name)
		}
		// A broken agent is still declared, so that the steps naming it
		// are not reported as well.
		a := d.decodeAgent(name, k, n.vals[i])
		d.agents[name], d.agentNodes[name] = a, n.vals[i]
		d.wf.Agents[name] = a
	}
}

// decodeAgent builds an agent from the defaults (steps.NewAgent) and the
// keys the file sets, then runs the agent's own checks, so that the rules
// the runner relies on are written once, in package steps.
func (d *decoder) decodeAgent(name string, key, v *node) *steps.Agent {
	a := steps.NewAgent(name)
	ctx := fmt.Sprintf("agent %q", name)
	f := d.fields(v, ctx, agentKeys)
	if f == nil {
		return a
	}
	before := len(d.errs)
	d.decodeAgentSource(a, f, ctx)
	if n := f["command"]; n != nil {
		a.Command, _ = d.literal(n, ctx+": command")
	}
	if n := f["args"]; n != nil {
		a.Args = d.agentArgs(n, ctx, name)
	}
	if n := f["env"]; n != nil {
		// Laid over the preset's env: the file's values win.
		env := d.agentEnv(n, ctx, name)
		if a.Env == nil {
			a.Env = env
		}
		for k, v := range env {
			a.Env[k] = v
		}
	}
	if n := f["cwd"]; n != nil {
		a.Cwd, _ = d.literal(n, ctx+": cwd")
		a.CwdSet = true
	}
	if n := f["auth"]; n != nil {
		a.Auth, _ = d.literal(n, ctx+": auth")
	}
	if n := f["mode"]; n != nil {
		if s, ok := d.mode(n, ctx+": mode"); ok {
			d.template(n, s, scope{agent: name})
			a.Mode = s
		}
	}
	if n := f["config"]; n != nil {
		a.Config = d.agentConfig(n, ctx, name)
	}
	if n := f["mcp-servers"]; n != nil {
		a.MCPServers = d.mcpServers(v, n, ctx, name)
	}
	if n := f["max-output"]; n != nil {
		if v, ok := d.size(n, ctx+": max-output"); ok {
			a.MaxOutput = v
		}
	}
	if n := f["reuse"]; n != nil {
		a.Reuse, _ = d.boolean(n, ctx+": reuse")
	}
	if n := f["sandbox"]; n != nil {
		a.Sandbox, a.SandboxSet = d.sandbox(n, ctx), true
	}
	if n := f["gateway"]; n != nil {
		a.Gateway, a.GatewaySet = d.gateway(n, ctx, name), true
		if msg := checkGateway(a); msg != "" {
			d.at(n.pos, "%s", msg)
		}
	}
	if n := f["start-timeout"]; n != nil {
		if t, ok := d.duration(n, ctx+": start-timeout"); ok {
			a.StartTimeout = t
		}
	}
	if n := f["dispose"]; n != nil {
		d.decodeDispose(a, n, ctx)
	}
	if len(d.errs) == before {
		if err := acpagent.Check(a); err != nil {
			d.at(agentErrorAt(err, key, v), "%s", err)
		}
	}
	return a
}

// decodeAgentSource reads what the agent is built on: a builtin, a
// recording it replays (from:), or a preset whose defaults the keys that
// follow may override.
func (d *decoder) decodeAgentSource(a *steps.Agent, f map[string]*node, ctx string) {
	if n := f["builtin"]; n != nil {
		a.Builtin, _ = d.literal(n, ctx+": builtin")
	}
	if n := f["from"]; n != nil {
		if s, ok := d.literal(n, ctx+": from"); ok {
			a.From = replayagent.Anchor(d.baseDir(), s)
		}
	}
	if n := f["preset"]; n != nil {
		if s, ok := d.literal(n, ctx+": preset"); ok {
			if p, ok := d.lookupPreset(a.Name, s, n); ok {
				presetDefaults(a, p, fileSets(f))
			}
		}
	}
}

// decodeDispose reads an agent's dispose: mapping, the waits of its
// shutdown: after stdin closes (eof-grace), idle output (eof-idle), and
// after SIGTERM (term-grace).
func (d *decoder) decodeDispose(a *steps.Agent, n *node, ctx string) {
	dispose := d.fields(n, ctx+": dispose", disposeKeys)
	if g := dispose["eof-grace"]; g != nil {
		if t, ok := d.duration(g, ctx+": dispose.eof-grace"); ok {
			a.EOFGrace = t
		}
	}
	if g := dispose["eof-idle"]; g != nil {
		if t, ok := d.durationOrOff(g, ctx+": dispose.eof-idle"); ok {
			a.EOFIdle = t
		}
	}
	if g := dispose["term-grace"]; g != nil {
		if t, ok := d.duration(g, ctx+": dispose.term-grace"); ok {
			a.TermGrace = t
		}
	}
}

// durationOrOff reads a duration that may also be 0 (written 0 or 0s):
// the setting is off.
func (d *decoder) durationOrOff(n *node, what string) (time.Duration, bool) {
	switch x := n.value.(type) {
	case int:
		if x == 0 {
			return 0, true
		}
	case string:
		if v, err := time.ParseDuration(strings.TrimSpace(x)); err == nil && v == 0 { // "0", "0s", "0ms"…
			return 0, true
		}
	}
	return d.duration(n, what)
}

// agentErrorAt places an error of acpagent.Check: on the value its
// steps.FieldError path leads to, as deep as the file goes; on preset: when
// the file does not write the key at all but names a preset (which gave
// the value); else on the agent's name.
func agentErrorAt(err error, key, v *node) pos {
	var fe *steps.FieldError
	if !errors.As(err, &fe) || len(fe.Path) == 0 {
		return key.pos
	}
	if n, depth := follow(v, fe.Path); depth > 0 {
		return n.pos
	}
	if p := v.get("preset"); p != nil {
		return p.pos
	}
	return key.pos
}

// literal reads a string that is used as written: an agent's command,
// builtin, preset, cwd and auth are never rendered, so a ${{ }} in one is
// refused rather than passed on as text (a command named "${{ … }}", or
// one chosen by an input, which would let a run's inputs pick what is
// executed).
func (d *decoder) literal(n *node, what string) (string, bool) {
	s, ok := d.str(n, what)
	if ok && strings.Contains(s, "${{") {
		d.at(d.find(n, "${{", 0), "%s: ${{ }} is not rendered here; write the value itself (expressions are rendered in args, env, mode and config)", what)
		return s, false
	}
	return s, ok
}

// lookupPreset finds the preset an agent names, reporting an unknown one
// with the list of those that exist.
func (d *decoder) lookupPreset(agent, name string, n *node) (acpagent.Preset, bool) {
	p, ok := acpagent.LookupPreset(name)
	if !ok {
		var known []string
		for _, p := range acpagent.Presets() {
			known = append(known, p.Name)
		}
		d.at(n.pos, "agent %q: unknown preset %q%s", agent, name, knownList(name, known))
	}
	return p, ok
}

// fileSets reports whether an agent's mapping sets a key, a dispose key
// written as "dispose.eof-grace".
func fileSets(f map[string]*node) func(key string) bool {
	return func(key string) bool {
		if sub, ok := strings.CutPrefix(key, "dispose."); ok {
			return f["dispose"] != nil && f["dispose"].kind == mappingNode && f["dispose"].get(sub) != nil
		}
		return f[key] != nil
	}
}

// presetDefaults fills what a preset gives into a, before the file's own
// keys are read: keys the file sets win, so a preset can be adjusted
// without being copied out. A command of the file's own replaces the
// preset's args too (they are the preset command's, `-y @pkg` for npx),
// unless the file gives args as well. A zero preset timing or an empty mode
// keeps what a already has.
func presetDefaults(a *steps.Agent, p acpagent.Preset, set func(key string) bool) {
	a.Preset = p.Name
	switch {
	case !set("command") && !set("args"):
		a.Command, a.Args = p.Command, p.Argv()
	case !set("command"):
		a.Command = p.Command
	case !set("args"):
		// A command of the file's own replaces the preset's launcher (npx
		// -y PACKAGE) but keeps the agent's own flags (--acp, codex's
		// approval settings), without which the preset's promises fail.
		a.Args = append([]string(nil), p.Args...)
	}
	if len(p.SetEnv) > 0 {
		a.Env = maps.Clone(p.SetEnv)
	}
	if p.Mode != "" && !set("mode") {
		a.Mode = p.Mode
	}
	if p.EOFGrace > 0 && !set("dispose.eof-grace") {
		a.EOFGrace = p.EOFGrace
	}
	if p.TermGrace > 0 && !set("dispose.term-grace") {
		a.TermGrace = p.TermGrace
	}
	if p.EOFIdle > 0 && !set("dispose.eof-idle") {
		a.EOFIdle = p.EOFIdle
	}
}

// agentArgs reads args. They stay raw strings in steps.Agent, rendered by
// the step that spawns the agent, but are compiled here so a broken
// template fails validation rather than a run.
func (d *decoder) agentArgs(n *node, ctx, agent string) []string {
	if n.kind != sequenceNode {
		d.wrong(n, "%s: args: want a list of strings, got %s", ctx, n.describe())
		return nil
	}
	args := make([]string, 0, len(n.items))
	for _, it := range n.items {
		s, ok := d.text(it, ctx+": args")
		if !ok {
			continue
		}
		d.template(it, s, scope{agent: agent})
		args = append(args, s)
	}
	return args
}

// agentEnv reads env, compiling its values for validation as agentArgs does.
func (d *decoder) agentEnv(n *node, ctx, agent string) map[string]string {
	if !d.mapping(n, ctx+": env") {
		return nil
	}
	env := make(map[string]string, len(n.keys))
	for i, k := range n.keys {
		name := k.value.(string)
		if name == "" || strings.ContainsAny(name, "=\x00") {
			d.at(k.pos, "%s: env: %q is not a variable name", ctx, name)
			continue
		}
		v := n.vals[i]
		s, ok := d.text(v, fmt.Sprintf("%s: env: %s", ctx, name))
		if !ok {
			continue
		}
		d.template(v, s, scope{agent: agent})
		env[name] = s
	}
	return env
}

// mode reads an ACP session mode id. A number is refused rather than
// taken as written: mode ids are words (read-only, auto), and a number
// here is more likely a mistake than a mode.
func (d *decoder) mode(n *node, what string) (string, bool) {
	switch v := n.value.(type) {
	case string:
		if n.kind == scalarNode {
			return v, true
		}
	case int, float64:
		d.at(n.pos, "%s: want a mode id (a string such as read-only), got %s; quote it if the agent's mode id is %q", what, n.describe(), fmt.Sprint(v))
		return "", false
	}
	d.wrong(n, "%s: want a mode id (a string such as read-only), got %s", what, n.describe())
	return "", false
}

// agentConfig reads config: ACP config option ids to value ids, a boolean
// written as "true"/"false" (acpagent.ConfigValue, which the runner also uses
// on a step's with.config). Values are compiled as agentEnv's are.
func (d *decoder) agentConfig(n *node, ctx, agent string) map[string]string {
	if !d.mapping(n, ctx+": config") {
		return nil
	}
	cfg := make(map[string]string, len(n.keys))
	for i, k := range n.keys {
		id := k.value.(string)
		if id == "" {
			d.at(k.pos, "%s: config: an option id is empty", ctx)
			continue
		}
		v := n.vals[i]
		s, err := acpagent.ConfigValue(v.plain())
		if err != nil {
			d.wrong(v, "%s: config: %s: %s", ctx, id, err)
			continue
		}
		if _, isText := v.value.(string); isText {
			d.template(v, s, scope{agent: agent})
		}
		cfg[id] = s
	}
	return cfg
}

// mcpServers reads an agent's mcp-servers (agent is the agent's mapping,
// n the list). Their shape and rules are acpagent.MCPServersOf's, which a
// step's with.mcp-servers goes through too; the error is placed by its
// path. The strings that are rendered are compiled here, as agentEnv's are.
func (d *decoder) mcpServers(agent, n *node, ctx, name string) []steps.MCPServer {
	servers, err := acpagent.MCPServersOf(n.plain(), []string{"mcp-servers"})
	if err != nil {
		var fe *steps.FieldError
		at := n.pos
		if errors.As(err, &fe) {
			x, _ := follow(agent, fe.Path)
			at = x.pos
		}
		d.at(at, "%s: %s", ctx, err)
		return nil
	}
	for _, entry := range n.items {
		for _, key := range []string{"command", "url", "args", "env", "headers"} {
			v := entry.get(key)
			if v == nil {
				continue
			}
			values := []*node{v}
			switch v.kind {
			case sequenceNode:
				values = v.items
			case mappingNode:
				values = v.vals
			}
			for _, x := range values {
				if s, ok := x.value.(string); ok && x.kind == scalarNode {
					d.template(x, s, scope{agent: name})
				}
			}
		}
	}
	return servers
}

// size reads a size (acpagent.SizeOf): a whole number of bytes, or a number
// with a unit such as 8 MiB.
func (d *decoder) size(n *node, what string) (int64, bool) {
	if n.kind == scalarNode {
		switch n.value.(type) {
		case int, float64, string:
			v, err := acpagent.SizeOf(n.value)
			if err != nil {
				d.at(n.pos, "%s: %s", what, err)
				return 0, false
			}
			return v, true
		}
	}
	d.wrong(n, "%s: want a size such as 8 MiB or a whole number of bytes, got %s", what, n.describe())
	return 0, false
}
