package acpagent

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/acpflow/acpflow/internal/replayagent"
	"github.com/acpflow/acpflow/steps"
)

var (
	// AgentKeys are the keys of an agent's mapping in a workflow file.
	AgentKeys = []string{"builtin", "from", "command", "args", "env", "cwd", "auth", "preset", "mode", "config", "mcp-servers", "max-output", "reuse", "sandbox", "gateway", "start-timeout", "dispose"}
	// DisposeKeys are the keys of an agent's dispose: mapping.
	DisposeKeys = []string{"eof-grace", "eof-idle", "term-grace"}
)

// at is a path into an agent's mapping.
func at(keys ...string) []string { return keys }

// DecodeAgent builds an agent from the defaults (steps.NewAgent) and the
// keys the file sets, then runs Check, so that the rules the runner relies
// on are written once, here.
func DecodeAgent(name string, b steps.AgentBlock) *steps.Agent {
	a := steps.NewAgent(name)
	ctx := fmt.Sprintf("agent %q", name)
	decodeSource(a, b, ctx)
	if b.Has("command") {
		a.Command, _ = b.Literal(at("command"), ctx+": command")
	}
	if b.Has("args") {
		a.Args = decodeArgs(b, ctx)
	}
	if b.Has("env") {
		// Laid over the preset's env: the file's values win.
		env := decodeEnv(b, ctx)
		if a.Env == nil {
			a.Env = env
		}
		for k, v := range env {
			a.Env[k] = v
		}
	}
	if b.Has("cwd") {
		a.Cwd, _ = b.Literal(at("cwd"), ctx+": cwd")
		a.CwdSet = true
	}
	if b.Has("auth") {
		a.Auth, _ = b.Literal(at("auth"), ctx+": auth")
	}
	if b.Has("mode") {
		if s, ok := decodeMode(b, at("mode"), ctx+": mode"); ok {
			b.Template(at("mode"), s)
			a.Mode = s
		}
	}
	decodeSession(a, b, ctx)
	if b.Has("dispose") {
		decodeDispose(a, b, ctx)
	}
	if b.Clean() {
		if err := Check(a); err != nil {
			reportCheck(b, err, "%s", err)
		}
	}
	return a
}

// decodeSession reads what the agent's sessions get and are bounded by:
// config, MCP servers, output, reuse, sandbox, gateway and start timeout.
func decodeSession(a *steps.Agent, b steps.AgentBlock, ctx string) {
	if b.Has("config") {
		a.Config = decodeConfig(b, ctx)
	}
	if b.Has("mcp-servers") {
		a.MCPServers = decodeMCPServers(b, ctx)
	}
	if b.Has("max-output") {
		if v, ok := decodeSize(b, at("max-output"), ctx+": max-output"); ok {
			a.MaxOutput = v
		}
	}
	if b.Has("reuse") {
		a.Reuse, _ = b.Bool(at("reuse"), ctx+": reuse")
	}
	if b.Has("sandbox") {
		a.Sandbox, a.SandboxSet = b.Sandbox(at("sandbox"), ctx), true
	}
	if b.Has("gateway") {
		a.Gateway, a.GatewaySet = b.Gateway(at("gateway"), ctx), true
		if msg := CheckGateway(a); msg != "" {
			b.Report(at("gateway"), "%s", msg)
		}
	}
	if b.Has("start-timeout") {
		if t, ok := b.Duration(at("start-timeout"), ctx+": start-timeout"); ok {
			a.StartTimeout = t
		}
	}
}

// decodeSource reads what the agent is built on: a builtin, a recording it
// replays (from:), or a preset whose defaults the keys that follow may
// override.
func decodeSource(a *steps.Agent, b steps.AgentBlock, ctx string) {
	if b.Has("builtin") {
		a.Builtin, _ = b.Literal(at("builtin"), ctx+": builtin")
	}
	if b.Has("from") {
		if s, ok := b.Literal(at("from"), ctx+": from"); ok {
			a.From = replayagent.Anchor(b.Dir(), s)
		}
	}
	if b.Has("preset") {
		if s, ok := b.Literal(at("preset"), ctx+": preset"); ok {
			if p, ok := lookupPreset(b, a.Name, s); ok {
				presetDefaults(a, p, fileSets(b))
			}
		}
	}
}

// decodeDispose reads an agent's dispose: mapping, the waits of its
// shutdown: after stdin closes (eof-grace), idle output (eof-idle), and
// after SIGTERM (term-grace).
func decodeDispose(a *steps.Agent, b steps.AgentBlock, ctx string) {
	if !b.Fields(at("dispose"), ctx+": dispose", DisposeKeys) {
		return
	}
	if b.Has("dispose", "eof-grace") {
		if t, ok := b.Duration(at("dispose", "eof-grace"), ctx+": dispose.eof-grace"); ok {
			a.EOFGrace = t
		}
	}
	if b.Has("dispose", "eof-idle") {
		if t, ok := b.DurationOrOff(at("dispose", "eof-idle"), ctx+": dispose.eof-idle"); ok {
			a.EOFIdle = t
		}
	}
	if b.Has("dispose", "term-grace") {
		if t, ok := b.Duration(at("dispose", "term-grace"), ctx+": dispose.term-grace"); ok {
			a.TermGrace = t
		}
	}
}

// reportCheck places an error of Check: on the value its
// steps.FieldError path leads to, as deep as the file goes; on preset:
// when the file does not write the key at all but names a preset (which
// gave the value); else on the agent's name.
func reportCheck(b steps.AgentBlock, err error, format string, args ...any) {
	var fe *steps.FieldError
	switch {
	case !errors.As(err, &fe) || len(fe.Path) == 0:
		b.Report(nil, format, args...)
	case b.Has(fe.Path[0]):
		b.Report(fe.Path, format, args...)
	case b.Has("preset"):
		b.Report(at("preset"), format, args...)
	default:
		b.Report(nil, format, args...)
	}
}

// lookupPreset finds the preset an agent names, reporting an unknown one
// with the list of those that exist.
func lookupPreset(b steps.AgentBlock, agent, name string) (Preset, bool) {
	p, ok := LookupPreset(name)
	if !ok {
		var known []string
		for _, p := range Presets() {
			known = append(known, p.Name)
		}
		b.Report(at("preset"), "agent %q: unknown preset %q%s", agent, name, b.KnownList(name, known))
	}
	return p, ok
}

// fileSets reports whether an agent's mapping sets a key, a dispose key
// written as "dispose.eof-grace".
func fileSets(b steps.AgentBlock) func(key string) bool {
	return func(key string) bool {
		if sub, ok := strings.CutPrefix(key, "dispose."); ok {
			return b.Has("dispose", sub)
		}
		return b.Has(key)
	}
}

// presetDefaults fills what a preset gives into a, before the file's own
// keys are read: keys the file sets win, so a preset can be adjusted
// without being copied out. A command of the file's own replaces the
// preset's args too (they are the preset command's, `-y @pkg` for npx),
// unless the file gives args as well. A zero preset timing or an empty mode
// keeps what a already has.
func presetDefaults(a *steps.Agent, p Preset, set func(key string) bool) {
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

// decodeArgs reads args. They stay raw strings in steps.Agent, rendered by
// the step that spawns the agent, but are compiled here so a broken
// template fails validation rather than a run.
func decodeArgs(b steps.AgentBlock, ctx string) []string {
	if v, _ := b.Value("args"); !isList(v) {
		b.Wrong(at("args"), "%s: args: want a list of strings, got %s", ctx, b.Describe("args"))
		return nil
	}
	n := b.Len("args")
	args := make([]string, 0, n)
	for i := range n {
		path := at("args", strconv.Itoa(i))
		s, ok := b.Text(path, ctx+": args")
		if !ok {
			continue
		}
		b.Template(path, s)
		args = append(args, s)
	}
	return args
}

// isList reports whether a plain value is a list (an empty one included).
func isList(v any) bool {
	_, ok := v.([]any)
	return ok
}

// decodeEnv reads env, compiling its values for validation as decodeArgs
// does.
func decodeEnv(b steps.AgentBlock, ctx string) map[string]string {
	if !b.Mapping(at("env"), ctx+": env") {
		return nil
	}
	keys := b.Keys("env")
	env := make(map[string]string, len(keys))
	for _, name := range keys {
		if name == "" || strings.ContainsAny(name, "=\x00") {
			b.ReportKey(at("env", name), "%s: env: %q is not a variable name", ctx, name)
			continue
		}
		s, ok := b.Text(at("env", name), fmt.Sprintf("%s: env: %s", ctx, name))
		if !ok {
			continue
		}
		b.Template(at("env", name), s)
		env[name] = s
	}
	return env
}

// decodeMode reads an ACP session mode id. A number is refused rather
// than taken as written: mode ids are words (read-only, auto), and a
// number here is more likely a mistake than a mode.
func decodeMode(b steps.AgentBlock, path []string, what string) (string, bool) {
	v, scalar := b.Value(path...)
	switch v := v.(type) {
	case string:
		if scalar {
			return v, true
		}
	case int, float64:
		b.Report(path, "%s: want a mode id (a string such as read-only), got %s; quote it if the agent's mode id is %q", what, b.Describe(path...), fmt.Sprint(v))
		return "", false
	}
	b.Wrong(path, "%s: want a mode id (a string such as read-only), got %s", what, b.Describe(path...))
	return "", false
}

// decodeConfig reads config: ACP config option ids to value ids, a boolean
// written as "true"/"false" (ConfigValue, which the runner also uses on a
// step's with.config). Values are compiled as decodeEnv's are.
func decodeConfig(b steps.AgentBlock, ctx string) map[string]string {
	if !b.Mapping(at("config"), ctx+": config") {
		return nil
	}
	keys := b.Keys("config")
	cfg := make(map[string]string, len(keys))
	for _, id := range keys {
		if id == "" {
			b.ReportKey(at("config", id), "%s: config: an option id is empty", ctx)
			continue
		}
		v, _ := b.Value("config", id)
		s, err := ConfigValue(v)
		if err != nil {
			b.Wrong(at("config", id), "%s: config: %s: %s", ctx, id, err)
			continue
		}
		if _, isText := v.(string); isText {
			b.Template(at("config", id), s)
		}
		cfg[id] = s
	}
	return cfg
}

// decodeMCPServers reads an agent's mcp-servers. Their shape and rules
// are MCPServersOf's, which a step's with.mcp-servers goes through too;
// the error is placed by its path. The strings that are rendered are
// compiled here, as decodeEnv's are.
func decodeMCPServers(b steps.AgentBlock, ctx string) []steps.MCPServer {
	v, _ := b.Value("mcp-servers")
	servers, err := MCPServersOf(v, []string{"mcp-servers"})
	if err != nil {
		var fe *steps.FieldError
		path := at("mcp-servers")
		if errors.As(err, &fe) {
			path = fe.Path
		}
		b.Report(path, "%s: %s", ctx, err)
		return nil
	}
	for i := range b.Len("mcp-servers") {
		entry := at("mcp-servers", strconv.Itoa(i))
		for _, key := range []string{"command", "url", "args", "env", "headers"} {
			templateStrings(b, append(entry, key))
		}
	}
	return servers
}

// templateStrings compiles the string at path, or the strings of the list
// or mapping there (one level down).
func templateStrings(b steps.AgentBlock, path []string) {
	var below [][]string
	switch v, scalar := b.Value(path...); {
	case scalar:
		below = [][]string{path}
	case isList(v):
		for i := range b.Len(path...) {
			below = append(below, append(slices.Clip(path), strconv.Itoa(i)))
		}
	default:
		for _, k := range b.Keys(path...) {
			below = append(below, append(slices.Clip(path), k))
		}
	}
	for _, p := range below {
		if s, scalar := b.Value(p...); scalar {
			if s, ok := s.(string); ok {
				b.Template(p, s)
			}
		}
	}
}

// decodeSize reads a size (SizeOf): a whole number of bytes, or a number
// with a unit such as 8 MiB.
func decodeSize(b steps.AgentBlock, path []string, what string) (int64, bool) {
	v, scalar := b.Value(path...)
	if scalar {
		switch v.(type) {
		case int, float64, string:
			n, err := SizeOf(v)
			if err != nil {
				b.Report(path, "%s: %s", what, err)
				return 0, false
			}
			return n, true
		}
	}
	b.Wrong(path, "%s: want a size such as 8 MiB or a whole number of bytes, got %s", what, b.Describe(path...))
	return 0, false
}

// CheckGateway says what an agent with a gateway lacks to be pointed at
// it ("" when nothing): a builtin calls no model, and an agent no preset
// wires needs api:, base-url-env: and key-env:, which say how it reads its
// model.
func CheckGateway(a *steps.Agent) string {
	g := a.Gateway
	if g == nil {
		return ""
	}
	if a.Builtin != "" {
		return fmt.Sprintf("agent %q: gateway: builtin agents call no model; remove gateway: from it", a.Name)
	}
	if _, ok := GatewayOf(a.Preset); ok {
		return ""
	}
	var missing []string
	if g.API == "" {
		missing = append(missing, "api (anthropic, openai or gemini)")
	}
	if g.BaseURLEnv == "" {
		missing = append(missing, "base-url-env (the variable the agent reads its model's base URL from)")
	}
	if g.KeyEnv == "" {
		missing = append(missing, "key-env (the variable the agent reads its key from)")
	}
	if len(missing) == 0 {
		return ""
	}
	who := "no preset"
	if a.Preset != "" {
		who = fmt.Sprintf("preset %s does not say how its agent is pointed at a gateway", a.Preset)
	}
	return fmt.Sprintf("agent %q: gateway: %s; set %s", a.Name, who, strings.Join(missing, ", "))
}
