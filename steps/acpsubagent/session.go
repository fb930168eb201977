package acpsubagent

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acpflow/acpflow/internal/termtext"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// sessionSettings are the mode and config options a step asks of its
// session, rendered: the agent's, with the step's `with:` on top.
type sessionSettings struct {
	mode   string
	config map[string]string // option id → value id ("true"/"false" for a boolean)
}

// sessionSettings renders the agent's mode and config and lays the step's
// over them; stepOnly takes the step's alone, for a session that already
// has the agent's (continued on its live process).
func (a *attempt) sessionSettings(stepOnly bool) (sessionSettings, error) {
	var st sessionSettings
	st.config = map[string]string{}
	if stepOnly {
		return a.stepSettings(st)
	}
	if a.agent.Mode != "" {
		m, err := a.render(a.agent.Mode)
		if err != nil {
			return st, fmt.Errorf("agents.%s.mode: %w", a.agent.Name, err)
		}
		st.mode = a.allowMode(m)
	}
	for id, v := range a.agent.Config {
		r, err := a.render(v)
		if err != nil {
			return st, fmt.Errorf("agents.%s.config.%s: %w", a.agent.Name, id, err)
		}
		st.config[id] = r
	}
	return a.stepSettings(st)
}

// allowMode is the mode to set instead of mode: the preset's AllowMode when
// mode is the preset's own and the permission policy, with the outer one,
// allows everything.
func (a *attempt) allowMode(mode string) string {
	p, ok := acpagent.LookupPreset(a.agent.Preset)
	if !ok || p.AllowMode == "" || mode != p.Mode || !a.inv.Outer.AllowsAll(a.inv.Permission) {
		return mode
	}
	return p.AllowMode
}

// stepSettings lays the step's with.mode and with.config over st.
func (a *attempt) stepSettings(st sessionSettings) (sessionSettings, error) {
	if m, ok := a.inv.With["mode"].(string); ok {
		st.mode = m // "" on a step: no mode, whatever the agent's
	}
	if c, ok := a.inv.With["config"].(map[string]any); ok {
		for id, v := range c {
			value, err := acpagent.ConfigValue(v)
			if err != nil {
				return st, fmt.Errorf("with.config.%s: %w", id, err)
			}
			st.config[id] = value
		}
	}
	return st, nil
}

// maxOutput is the step's output limit in bytes: with.max-output, else the
// agent's, else the default.
func (a *attempt) maxOutput() (int64, error) {
	if v, ok := a.inv.With["max-output"]; ok && v != nil {
		n, err := acpagent.SizeOf(v)
		if err != nil {
			return 0, fmt.Errorf("with.max-output: %w", err)
		}
		return n, nil
	}
	if a.agent.MaxOutput > 0 {
		return a.agent.MaxOutput, nil
	}
	return steps.DefaultMaxOutput, nil
}

// offered is what a session offers to be set: its modes and config
// options, as session/new (or load, resume, fork) answered.
type offered struct {
	modes   *acp.SessionModeState
	options []acp.SessionConfigOption
}

// startMode is the mode the session was offered in: its current mode, or
// its mode option's value ("" for neither).
func (off offered) startMode() string {
	if off.modes != nil {
		return string(off.modes.CurrentModeId)
	}
	if o := modeOption(off.options); o != nil {
		return string(o.CurrentValue)
	}
	return ""
}

// widening lists, as "ID=VALUE", the values of the offered permission
// options (the mode option aside) that would let the agent decide alone,
// at most maxOffered of them.
func (off offered) widening(preset string) []string {
	var out []string
	for _, o := range off.options {
		if !permissionOption(o) {
			continue
		}
		id, _, _ := optionValue(o)
		values := []string{"true"}
		if o.Select != nil {
			values = selectValues(o.Select.Options)
		}
		for _, v := range values {
			if widens(preset, o, v) && len(out) < maxOffered {
				out = append(out, termtext.Cut(id, 80)+"="+termtext.Cut(v, 80))
			}
		}
	}
	return out
}

// forkOffered reads a fork's answer, whose config options are the SDK's
// unstable type of the same JSON.
func forkOffered(r acp.UnstableForkSessionResponse) offered {
	off := offered{modes: r.Modes}
	if len(r.ConfigOptions) > 0 {
		if b, err := json.Marshal(r.ConfigOptions); err == nil {
			_ = json.Unmarshal(b, &off.options) // what does not decode is not offered
		}
	}
	return off
}

// configure sets the session's mode and config options, each checked
// against what the agent offered in session/new, so a typo names the
// values that exist instead of failing somewhere inside the agent.
func (a *attempt) configure(ctx context.Context, sid acp.SessionId, off offered, st sessionSettings) error {
	a.scribe.modelSession(st.mode, st.config)
	mode := st.mode
	if o := modeOption(off.options); st.mode != "" && off.modes == nil && o != nil {
		// The agent keeps its mode as a config option of category mode
		// (opencode: its primary agents): the mode is that option's value.
		id := string(o.Id)
		if !slices.Contains(selectValues(o.Options), st.mode) {
			return fmt.Errorf("agent %s: mode %q is not one it offers (offered: %s)", a.agent.Name, st.mode, offeredList(selectValues(o.Options)))
		}
		if _, set := st.config[id]; !set {
			st.config = maps.Clone(st.config)
			st.config[id] = st.mode
		}
		st.mode = ""
	}
	if st.mode != "" {
		var offered []string
		if off.modes != nil {
			for _, m := range off.modes.AvailableModes {
				offered = append(offered, string(m.Id))
			}
		}
		switch {
		case len(offered) == 0:
			return fmt.Errorf("agent %s offers no session modes, so mode %q cannot be set; remove mode:", a.agent.Name, st.mode)
		case !slices.Contains(offered, st.mode):
			return fmt.Errorf("agent %s: mode %q is not one it offers (offered: %s)", a.agent.Name, st.mode, offeredList(offered))
		}
		if off.modes.CurrentModeId != acp.SessionModeId(st.mode) {
			if _, err := acp.SendRequest[acp.SetSessionModeResponse](a.p.conn, ctx, acp.AgentMethodSessionSetMode, acp.SetSessionModeRequest{SessionId: sid, ModeId: acp.SessionModeId(st.mode)}); err != nil {
				return a.startError(ctx, "session/set_mode", err)
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(st.config)) {
		req, err := configRequest(a.agent.Name, sid, off, id, st.config[id])
		if err != nil {
			return err
		}
		if _, err := acp.SendRequest[acp.SetSessionConfigOptionResponse](a.p.conn, ctx, acp.AgentMethodSessionSetConfigOption, req); err != nil {
			return a.startError(ctx, "session/set_config_option "+id, err)
		}
	}
	if st.mode != "" || len(st.config) > 0 {
		a.inv.Emit(acpagent.SessionConfigured{Mode: st.mode, Config: st.config})
	}
	return a.guardMode(ctx, sid, off, st, mode)
}

// guardMode sets up the mode guard (watch.go) for the session, unless the
// permission policy, with the outer one, is allow, or the agent is one of
// acpflow's own. A session that is in a mode in which the agent decides
// alone is set back to the step's mode (its agent's, its preset's) now,
// before anything is prompted, and a permission config option at a value
// that lets it decide alone is turned off; when that fails, or there is
// no mode to set back to, the step fails naming the mode. The mode and
// options it is left in are pinned for the rest of the session.
func (a *attempt) guardMode(ctx context.Context, sid acp.SessionId, off offered, st sessionSettings, mode string) error {
	// acpflow's own agents run nothing: the replay agent plays back a
	// recorded session, whose mode says what the recorded agent's was.
	if a.inv.Outer.AllowsAll(a.inv.Permission) || a.agent.Builtin != "" {
		return nil
	}
	safe := mode
	if safe == "" && a.agent.Mode != "" {
		if m, err := a.render(a.agent.Mode); err == nil {
			safe = m
		}
	}
	g := &modeGuard{preset: a.agent.Preset, safe: safe}
	current, optionID := "", ""
	if o := modeOption(off.options); o != nil {
		optionID, current = string(o.Id), string(o.CurrentValue)
		if v, set := st.config[optionID]; set {
			current = v
		}
	}
	if off.modes != nil {
		g.modes = off.modes.AvailableModes
		current = string(off.modes.CurrentModeId)
	}
	// validate refuses such a mode as written, but not one a ${{ }}
	// renders to or a replayed recording names: set back to itself, it
	// would be pinned.
	if g.safe != "" && g.decidesAlone(g.safe) {
		return fmt.Errorf("agent %s: mode %q lets it run commands and edit files without asking, so the permission policy would see none of it: under any permission policy but allow, set mode: to one in which it asks",
			a.agent.Name, termtext.Sanitize(termtext.Cut(g.safe, 80)))
	}
	if mode != "" {
		current = mode
	}
	g.setMode = func(ctx context.Context, id string) error {
		if off.modes == nil && optionID != "" {
			return a.setOption(ctx, sid, off, optionID, id)
		}
		_, err := acp.SendRequest[acp.SetSessionModeResponse](a.p.conn, ctx, acp.AgentMethodSessionSetMode, acp.SetSessionModeRequest{SessionId: sid, ModeId: acp.SessionModeId(id)})
		return err
	}
	g.setOption = func(ctx context.Context, id, value string) error { return a.setOption(ctx, sid, off, id, value) }
	if current != "" && g.decidesAlone(current) {
		if err := g.restore(current, g.safe); err != nil {
			return fmt.Errorf("agent %s: %w", a.agent.Name, err)
		}
		a.inv.Emit(acpagent.ModeRestored{From: termtext.Cut(current, 80), To: g.safe})
		current = g.safe
	}
	g.pinned = current
	options, err := a.pinOptions(ctx, g, off, st)
	if err != nil {
		return err
	}
	g.options = options
	a.client.mu.Lock()
	a.client.guard, a.client.mode = g, current
	a.client.mu.Unlock()
	return nil
}

// setOption sets config option id to value, shaped as the agent offered it.
func (a *attempt) setOption(ctx context.Context, sid acp.SessionId, off offered, id, value string) error {
	req, err := configRequest(a.agent.Name, sid, off, id, value)
	if err != nil {
		return err
	}
	_, err = acp.SendRequest[acp.SetSessionConfigOptionResponse](a.p.conn, ctx, acp.AgentMethodSessionSetConfigOption, req)
	return err
}

// pinOptions are the session's permission config options (its mode option
// aside) and the values the guard keeps them at: each one's value once
// configured, except that one which lets the agent decide alone is set to
// the first value that does not (Copilot's allow_all "on" to "off").
func (a *attempt) pinOptions(ctx context.Context, g *modeGuard, off offered, st sessionSettings) (map[string]string, error) {
	pinned := map[string]string{}
	for _, o := range off.options {
		id, value, ok := optionValue(o)
		if !ok || !permissionOption(o) {
			continue
		}
		if v, set := st.config[id]; set {
			value = v
		}
		if widens(g.preset, o, value) {
			safe, found := narrowValue(g.preset, o)
			if !found {
				return nil, fmt.Errorf("agent %s: its option %s is %q, which lets it decide alone, and it offers no value that does not", a.agent.Name, termtext.Sanitize(termtext.Cut(id, 80)), termtext.Sanitize(termtext.Cut(value, 80)))
			}
			if err := g.setOption(ctx, id, safe); err != nil {
				return nil, fmt.Errorf("agent %s: its option %s is %q, which lets it decide alone, and setting it to %q failed: %s", a.agent.Name, termtext.Sanitize(termtext.Cut(id, 80)), termtext.Sanitize(termtext.Cut(value, 80)), safe, describeLimited(err))
			}
			a.inv.Emit(acpagent.ModeRestored{Option: termtext.Cut(id, 80), From: termtext.Cut(value, 80), To: safe})
			value = safe
		}
		pinned[id] = value
	}
	return pinned, nil
}

// permissionOption reports whether a config option is one the guard pins:
// a permission option (acpagent.IsPermissionOption) other than the mode
// option, which is the mode.
func permissionOption(o acp.SessionConfigOption) bool {
	switch {
	case o.Select != nil:
		cat := categoryOf(o.Select.Category)
		return cat != string(acp.SessionConfigOptionCategoryMode) && acpagent.IsPermissionOption(string(o.Select.Id), o.Select.Name, cat)
	case o.Boolean != nil:
		cat := categoryOf(o.Boolean.Category)
		return cat != string(acp.SessionConfigOptionCategoryMode) && acpagent.IsPermissionOption(string(o.Boolean.Id), o.Boolean.Name, cat)
	}
	return false
}

func categoryOf(c *acp.SessionConfigOptionCategory) string {
	if c == nil {
		return ""
	}
	return string(*c)
}

// widens reports whether value of option o lets the agent decide alone,
// judged with the value's own name and description where offered.
func widens(preset string, o acp.SessionConfigOption, value string) bool {
	if o.Boolean != nil {
		return value == "true" && acpagent.WidensConfig(preset, string(o.Boolean.Id), value, "", "")
	}
	name, desc := valueWords(o.Select.Options, value)
	return acpagent.WidensConfig(preset, string(o.Select.Id), value, name, desc)
}

// narrowValue is the first value of option o that does not let the agent
// decide alone.
func narrowValue(preset string, o acp.SessionConfigOption) (string, bool) {
	if o.Boolean != nil {
		return "false", true
	}
	for _, v := range selectValues(o.Select.Options) {
		if !widens(preset, o, v) {
			return v, true
		}
	}
	return "", false
}

// valueWords are the name and description a select option gives value.
func valueWords(o acp.SessionConfigSelectOptions, value string) (name, desc string) {
	for _, v := range selectChoices(o) {
		if string(v.Value) == value {
			if v.Description != nil {
				desc = *v.Description
			}
			return v.Name, desc
		}
	}
	return "", ""
}

// configRequest builds session/set_config_option for one option, checked
// against the options the agent offered.
func configRequest(agent string, sid acp.SessionId, off offered, id, value string) (acp.SetSessionConfigOptionRequest, error) {
	var ids []string
	for _, o := range off.options {
		switch {
		case o.Select != nil && string(o.Select.Id) == id:
			values := selectValues(o.Select.Options)
			if !slices.Contains(values, value) {
				return acp.SetSessionConfigOptionRequest{}, fmt.Errorf("agent %s: config %s: value %q is not one it offers (offered: %s)", agent, id, value, offeredList(values))
			}
			return acp.SetSessionConfigOptionRequest{ValueId: &acp.SetSessionConfigOptionValueId{
				SessionId: sid, ConfigId: acp.SessionConfigId(id), Value: acp.SessionConfigValueId(value),
			}}, nil
		case o.Boolean != nil && string(o.Boolean.Id) == id:
			if value != "true" && value != "false" {
				return acp.SetSessionConfigOptionRequest{}, fmt.Errorf("agent %s: config %s is a boolean: want true or false, got %q", agent, id, value)
			}
			return acp.SetSessionConfigOptionRequest{Boolean: &acp.SetSessionConfigOptionBoolean{
				SessionId: sid, ConfigId: acp.SessionConfigId(id), Type: "boolean", Value: value == "true",
			}}, nil
		case o.Select != nil:
			ids = append(ids, string(o.Select.Id))
		case o.Boolean != nil:
			ids = append(ids, string(o.Boolean.Id))
		}
	}
	if len(ids) == 0 {
		return acp.SetSessionConfigOptionRequest{}, fmt.Errorf("agent %s offers no session config options, so config %s cannot be set", agent, id)
	}
	return acp.SetSessionConfigOptionRequest{}, fmt.Errorf("agent %s: config %s is not an option it offers (offered: %s)", agent, id, offeredList(ids))
}

// selectValues lists the value ids of a select option, grouped or not.
func selectValues(o acp.SessionConfigSelectOptions) []string {
	var out []string
	for _, v := range selectChoices(o) {
		out = append(out, string(v.Value))
	}
	return out
}

// selectChoices are a select option's choices, grouped or not, in order.
func selectChoices(o acp.SessionConfigSelectOptions) []acp.SessionConfigSelectOption {
	var out []acp.SessionConfigSelectOption
	if o.Ungrouped != nil {
		out = append(out, *o.Ungrouped...)
	}
	if o.Grouped != nil {
		for _, g := range *o.Grouped {
			out = append(out, g.Options...)
		}
	}
	return out
}

// maxOffered is how many of the values an agent offered an error lists:
// the list comes from the agent, and an error goes to the terminal and the
// run store.
const maxOffered = 20

// offeredList writes the values an agent offered, at most maxOffered of
// them, each at most 80 bytes.
func offeredList(values []string) string {
	shown := make([]string, 0, min(len(values), maxOffered))
	for _, v := range values[:min(len(values), maxOffered)] {
		shown = append(shown, termtext.Cut(v, 80))
	}
	list := strings.Join(shown, ", ")
	if len(values) > maxOffered {
		list += fmt.Sprintf(", … and %d more", len(values)-maxOffered)
	}
	return list
}
