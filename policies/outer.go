package policies

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/acpflow/acpflow/decisions"
)

// Layer says which layer of policy decided a permission: an outer policy
// file, or the workflow's own policy (docs/policies.md#the-outer-policy).
type Layer = decisions.Layer

const (
	LayerOuter    = decisions.LayerOuter    // an outer policy file decided, and its decision was final
	LayerWorkflow = decisions.LayerWorkflow // the workflow's policy (its own, a step's, or the default)
)

// OuterPolicy is one file of the outer policy: a policy set outside the
// workflow (by an organisation, a user, a command line) that the workflow
// cannot loosen. A file may set either kind or both.
type OuterPolicy struct {
	File       string     // where it was read from, absolute: recorded as the Policy of what it decides
	Permission Permission // nil: the file has no permission: section
	Env        Env        // nil: the file has no env: section
	// SandboxRequired is the file's `sandbox: required`: every agent runs
	// sandboxed (docs/sandbox.md), and no workflow can turn it off or make
	// it optional.
	SandboxRequired bool
	// Approvals is the file's `approvals:`: a webhook every ask of every
	// run goes to, besides the workflow's own; nil: none.
	Approvals *Approvals
	// Telemetry is the file's `telemetry:`: where each run's trace goes
	// (docs/traces.md); nil: the file has none.
	Telemetry *Telemetry
}

// Telemetry is an outer policy file's `telemetry:` (docs/traces.md): the
// OTLP collector each run exports its trace to, and what the trace may
// hold. It sits in the outer policy because who runs acpflow (an
// organisation, a user), not a workflow, decides where records of its
// runs go and whether prompts may leave the machine.
type Telemetry struct {
	File string // the outer policy file that set it, for messages
	// Endpoint is the collector's base URL, as OTEL_EXPORTER_OTLP_ENDPOINT
	// ("": that variable's).
	Endpoint string
	// Protocol is "http/protobuf" or "grpc" ("": OTEL_EXPORTER_OTLP_PROTOCOL's,
	// else http/protobuf).
	Protocol string
	// Headers are sent with every export, beside OTEL_EXPORTER_OTLP_HEADERS'.
	Headers map[string]string
	// Content lets prompts, messages, commands and model exchanges into
	// the trace; false keeps them out.
	Content bool
	// TraceURL is where a trace is seen, with {trace_id} in it: what `show`
	// and the UI link to.
	TraceURL string
}

// Telemetry is the telemetry: of the outermost file that has one, nil
// for none: the organisation's collector is where its runs' traces go, and
// a user's file does not send them elsewhere.
func (o Outer) Telemetry() *Telemetry {
	for _, l := range o {
		if l.Telemetry != nil {
			return l.Telemetry
		}
	}
	return nil
}

// SandboxRequiredBy is the outer policy file that requires a sandbox for
// every agent, "" for none.
func (o Outer) SandboxRequiredBy() string {
	for _, l := range o {
		if l.SandboxRequired {
			return l.File
		}
	}
	return ""
}

// Outer is the outer policy: its files, outermost first (the system's,
// the user's, $ACPFLOW_POLICY's, --policy's). The zero value is no outer
// policy: Answer and BuildEnv then decide as the workflow's policy alone.
//
// Every file is a ceiling on the workflow's policy and on the files after
// it: none can loosen what an earlier one decided, so a later file only
// ever tightens.
type Outer []OuterPolicy

// Answer decides req within the outer policy: each file's permission
// policy in turn, then p (the workflow's, configured at src). It is what
// the ACP client, `acpflow policy eval` and `acpflow policy test` call.
//
// An outer file's reject, reject_always and cancel are final: the answer is
// its own, recorded with Layer outer and its file as Policy, and nothing
// after it is asked. Its allow and allow_always let the next file, and in
// the end the workflow's policy, decide (Layer workflow).
//
// # Notes
//
// An outer allow is a ceiling of allow: a workflow's allow_always under it
// is answered as allow (the allow_once option), and the reason says so. An
// "always" answer is remembered by the agent, which stops asking about
// calls of that kind, so they would never reach the outer policy again
// (codex writes the rule to $HOME/.codex/rules/, where it outlives the
// run). An outer allow_always lets allow_always through. An outer policy
// that fails rejects, like any policy (Answer), and that is final too.
// Answer has no one to ask: an ask, in any layer, is its fallback's.
func (o Outer) Answer(ctx context.Context, p Permission, src Source, req *PermissionRequest) PermissionRecord {
	return o.AnswerAsking(ctx, p, src, req, nil)
}

// AnswerAsking is Answer with a person to ask (policies.AnswerAsking). An
// outer file that decides ask puts the question itself, and the answer
// (the person's, or the file's ask-fallback) is final, as its reject is:
// the organisation wanted a person, not the workflow, to decide.
func (o Outer) AnswerAsking(ctx context.Context, p Permission, src Source, req *PermissionRequest, asker Asker) PermissionRecord {
	if req == nil {
		req = &PermissionRequest{}
	}
	cappedBy := ""
	for _, l := range o {
		if l.Permission == nil {
			continue
		}
		rec := AnswerAsking(ctx, l.Permission, Source(l.File), req, asker)
		if rec.Ask != "" {
			rec.Layer = LayerOuter
			return rec
		}
		switch rec.Decision {
		case AllowAlways:
		case Allow:
			if cappedBy == "" {
				cappedBy = l.File
			}
		default:
			rec.Layer = LayerOuter
			return rec
		}
	}
	rec := AnswerAsking(ctx, p, src, req, asker)
	if rec.Decision == AllowAlways && cappedBy != "" {
		rec.Decision = Allow
		rec.Outcome, rec.OptionID = SelectOption(Allow, req.Tool.Kind, req.Options)
		reasons := []string{}
		if rec.Reason != "" {
			reasons = append(reasons, rec.Reason)
		}
		reasons = append(reasons, fmt.Sprintf("allow_always capped to allow by the outer policy (%s)", cappedBy))
		if rec.Outcome == OutcomeCancelled && Ambiguous(req.Options) == "" {
			reasons = append(reasons, reasonNoOption) // an ambiguous set's reason says so already
		}
		rec.Reason = strings.Join(reasons, "; ")
	}
	return rec
}

// OuterEnvError is an outer policy refusing a spawn: its env policy
// failed or denied, or it refuses a variable the workflow sets. It names
// the variable, never its value.
type OuterEnvError struct {
	File string // the outer policy file
	Rule string // what refused: an env rule's index (from 1), or the module's name; "" when unknown
	// Var is the variable refused ("": the whole spawn was refused).
	Var string
	// SetBy says who set Var: "the workflow's env" (explicit values) or
	// "the workflow's env policy" (a module that added or changed it). A
	// caller that knows better (agent x's env) may replace it.
	SetBy string
	// Reason is why the spawn was refused: the module's reason to deny, or
	// the failure's message (then Err is set).
	Reason string
	Err    error
}

func (e *OuterEnvError) Error() string {
	rule := ""
	if e.Rule != "" {
		rule = " (rule " + e.Rule + ")"
	}
	switch {
	case e.Var != "":
		return fmt.Sprintf("outer policy (%s) refuses %s set by %s%s; nothing was spawned", e.File, e.Var, e.SetBy, rule)
	case e.Err != nil:
		return fmt.Sprintf("outer policy (%s) failed, spawn refused: %s", e.File, e.Reason)
	}
	return fmt.Sprintf("outer policy (%s) refused the spawn%s: %s", e.File, rule, e.Reason)
}

func (e *OuterEnvError) Unwrap() error { return e.Err }

// Who set a variable an outer policy refuses (OuterEnvError.SetBy).
const (
	SetByExplicit = "the workflow's env"
	SetByPolicy   = "the workflow's env policy"
)

// OuterEnvRule is what one outer file's env policy decided for a spawn,
// for the record (the env event's `outer`).
//
// Its members are in name order, as every event's are.
type OuterEnvRule struct {
	Policy string `json:"policy"`                  // the file
	Stderr string `json:"policy_stderr,omitempty"` // what a module wrote to stderr
	Rule   string `json:"rule"`
}

// BuildEnv builds a child's environment within the outer policy: each
// file's env policy in turn, outermost first, then p (the workflow's; nil
// is the default). Like the package's BuildEnv it fails closed; an
// *OuterEnvError says that an outer file refused the spawn, any other
// error or a Deny is the workflow's policy's own.
//
// What an outer file drops cannot be put back:
//
//   - An outer env policy decides the ambient environment first, and the
//     next layer sees only what it kept: a keep rule of the workflow's
//     cannot bring back what it dropped.
//   - An explicit value (the agent's or the step's env:) that an outer
//     file forbids refuses the spawn. For expr rules, an explicit variable
//     is forbidden when the first of the file's rules that holds for it
//     (name and value, as for an ambient one) says drop; inherit and
//     scrub-credentials only thin what is inherited, so a key passed on
//     purpose still passes. For any other env policy (a WASM module, which
//     is sent the explicit values too), when its answer leaves the name out;
//     the values in its answer are what the next layer starts from.
//   - A variable the workflow's env policy adds or changes (a module may)
//     is judged as an explicit one by every outer file.
//
// # Notes
//
// The outer policy governs variables, not values: a workflow can still
// copy an ambient value into another name, an argument or a prompt with
// ${{ env.NAME }}, unless an outer rule catches it by its value. A secret
// that no workflow may read must not be in acpflow's environment.
func (o Outer) BuildEnv(ctx context.Context, p Env, req *EnvRequest) (EnvDecision, error) {
	if req == nil {
		req = &EnvRequest{}
	}
	cur := *req
	var ceilings []envCeiling
	var applied []OuterEnvRule
	for _, l := range o {
		if l.Env == nil {
			continue
		}
		c, err := outerEnv(ctx, l, &cur)
		if err != nil {
			return EnvDecision{Outer: applied}, err
		}
		for _, name := range slices.Sorted(maps.Keys(cur.Explicit)) {
			if err := c.admit(name, cur.Explicit[name], SetByExplicit); err != nil {
				return EnvDecision{Outer: applied}, err
			}
		}
		cur.Ambient, cur.Explicit = c.ambient, c.explicit
		ceilings = append(ceilings, c)
		applied = append(applied, c.rule)
	}
	dec, err := BuildEnv(ctx, p, &cur)
	dec.Outer = applied
	if err != nil || dec.Deny != "" || len(ceilings) == 0 {
		return dec, err
	}
	for _, name := range slices.Sorted(maps.Keys(dec.Env)) {
		value := dec.Env[name]
		if given(cur.Explicit, name, value) || given(cur.Ambient, name, value) {
			continue
		}
		for _, c := range ceilings {
			if err := c.admit(name, value, SetByPolicy); err != nil {
				return EnvDecision{Outer: applied}, err
			}
		}
	}
	return dec, nil
}

func given(m map[string]string, name, value string) bool {
	v, ok := m[name]
	return ok && v == value
}

// envCeiling is what one outer file's env policy lets through: the
// environment the next layer starts from, and a judge of a variable set
// on purpose.
type envCeiling struct {
	file              string
	ambient, explicit map[string]string
	// admits reports whether the file lets the workflow set name=value,
	// and when not, the rule that refused it.
	admits func(name, value string) (ok bool, rule string, err error)
	rule   OuterEnvRule
}

// admit is nil when c admits name=value, else the error that refuses the
// spawn for it.
func (c *envCeiling) admit(name, value, setBy string) error {
	ok, rule, err := c.admits(name, value)
	switch {
	case err != nil:
		return &OuterEnvError{File: c.file, Rule: rule, Reason: fmt.Sprintf("judging %s: %v", name, err), Err: err}
	case !ok:
		return &OuterEnvError{File: c.file, Rule: rule, Var: name, SetBy: setBy}
	}
	return nil
}

// outerEnv asks one outer file's env policy about req (see BuildEnv for
// what each form means), failing closed.
func outerEnv(ctx context.Context, l OuterPolicy, req *EnvRequest) (envCeiling, error) {
	c := envCeiling{file: l.File}
	at := *req // the request as this file saw it, for its rules on explicit values
	if rules, ok := l.Env.(*EnvRules); ok {
		// The ambient environment as the rules filter it, without the
		// explicit values, which are judged by the rules alone.
		amb := at
		amb.Explicit = nil
		dec, err := BuildEnv(ctx, rules, &amb)
		if err != nil {
			return c, &OuterEnvError{File: l.File, Reason: err.Error(), Err: err}
		}
		c.ambient, c.explicit = dec.Env, req.Explicit
		c.rule = OuterEnvRule{Policy: l.File, Rule: dec.Rule}
		c.admits = rulesAdmit(rules, &at)
		return c, nil
	}
	dec, err := BuildEnv(ctx, l.Env, req)
	c.rule = OuterEnvRule{Policy: l.File, Rule: dec.Rule, Stderr: dec.Stderr}
	switch {
	case err != nil:
		return c, &OuterEnvError{File: l.File, Rule: dec.Rule, Reason: err.Error(), Err: err}
	case dec.Deny != "":
		return c, &OuterEnvError{File: l.File, Rule: dec.Rule, Reason: dec.Deny}
	}
	c.ambient = make(map[string]string, len(dec.Env))
	c.explicit = make(map[string]string, len(req.Explicit))
	for name, value := range dec.Env {
		if _, explicit := req.Explicit[name]; explicit {
			c.explicit[name] = value
		} else {
			c.ambient[name] = value
		}
	}
	c.admits = func(name, _ string) (bool, string, error) {
		_, ok := dec.Env[name]
		return ok, dec.Rule, nil
	}
	return c, nil
}

// rulesAdmit judges a value set on purpose by the first of rules that
// holds for it (name and value, as for an ambient one): drop refuses it;
// no rule holding admits it, since inherit and scrub-credentials only thin
// what is inherited. at is the request the rules see.
func rulesAdmit(rules *EnvRules, at *EnvRequest) func(name, value string) (bool, string, error) {
	return func(name, value string) (bool, string, error) {
		for i, r := range rules.Rules {
			keep, matched, err := r.Match(name, value, at)
			if err != nil {
				return false, strconv.Itoa(i + 1), err
			}
			if matched {
				return keep, strconv.Itoa(i + 1), nil
			}
		}
		return true, "", nil
	}
}

// Admit judges values that the workflow hands to the agent's side besides
// its environment, named as variables: the env of one MCP server (which the
// agent starts with them) or its headers (which the agent sends). Each
// outer file judges them as BuildEnv judges the explicit values, so a drop
// an outer file holds for the agent's env holds for them too:
//
//   - for expr rules, a value is refused when the first of the file's
//     rules that holds for it (name and value) says drop;
//   - any other env policy (a WASM module) is asked with values as the
//     explicit ones and no ambient variable, and refuses every name its
//     answer leaves out, or all of them when it denies or fails. The values
//     it answers are not taken: what is sent is what the workflow wrote.
//
// setBy says who set them ("step s's mcp-servers.github.env"), for the
// *OuterEnvError, which names the variable, never its value. req is the
// spawn's request (workflow, run, step, agent, workspace, cwd); its
// ambient and explicit values are only used to keep them out of a rule's
// error.
func (o Outer) Admit(ctx context.Context, req *EnvRequest, values map[string]string, setBy string) error {
	if len(values) == 0 {
		return nil
	}
	if req == nil {
		req = &EnvRequest{}
	}
	names := slices.Sorted(maps.Keys(values))
	for _, l := range o {
		if l.Env == nil {
			continue
		}
		c := envCeiling{file: l.File}
		if rules, ok := l.Env.(*EnvRules); ok {
			at := &EnvRequest{Request: req.Request, Ambient: req.Ambient, Explicit: values}
			c.admits = rulesAdmit(rules, at)
		} else {
			at := &EnvRequest{Request: req.Request, Ambient: map[string]string{}, Explicit: values}
			dec, err := BuildEnv(ctx, l.Env, at)
			switch {
			case err != nil:
				return &OuterEnvError{File: l.File, Rule: dec.Rule, Reason: err.Error(), Err: err}
			case dec.Deny != "":
				return &OuterEnvError{File: l.File, Rule: dec.Rule, Reason: dec.Deny}
			}
			c.admits = func(name, _ string) (bool, string, error) {
				_, ok := dec.Env[name]
				return ok, dec.Rule, nil
			}
		}
		for _, name := range names {
			if err := c.admit(name, values[name], setBy); err != nil {
				return err
			}
		}
	}
	return nil
}
