// Package whatif re-decides recorded permission requests and spawns under
// other policies: what `acpflow policy test` reports (docs/transcripts.md).
// It reads transcripts (files, or the run store's), rebuilds every
// session/request_permission the agent sent as the live ACP client did
// (acpagent.FromACP), asks the policy within the outer policy
// (policies.Outer.Answer), and compares the answer with the one recorded;
// and it asks the env policy again for the environment of every recorded
// spawn, by name (spawn.go). No agent runs and nothing leaves the process;
// only a WASM policy runs code, in its sandbox.
package whatif

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"

	acp "github.com/coder/acp-go-sdk"
	gojson "github.com/goccy/go-json"

	"github.com/acpflow/acpflow/internal/transcript"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// Policies is what a what-if decides under: the permission and env
// policies of every step, and a step's own where it has one (a workflow's
// step with `policies: {permission: …, env: …}`), the permission policies
// within the outer policy, as a run decides.
type Policies struct {
	// Permission is nil when requests are not to be decided again (a
	// policy file with only env:): they are then not counted either.
	Permission policies.Permission
	Source     policies.Source                // recorded as the new answer's policy
	Steps      map[string]policies.Permission // by step id; recorded as policies.SourceStep
	// Env decides the recorded spawns; nil is policies.DefaultEnv, what a
	// run without an env policy uses.
	Env       policies.Env
	EnvSource policies.Source
	EnvSteps  map[string]policies.Env // by step id; recorded as policies.SourceStep
	// NoSpawns: spawns are not decided again, nor counted (a policy file
	// with only permission:, which says nothing of the environment).
	NoSpawns bool
	Outer    policies.Outer // nil: none
}

func (p *Policies) forStep(id string) (policies.Permission, policies.Source) {
	if perm, ok := p.Steps[id]; ok {
		return perm, policies.SourceStep
	}
	return p.Permission, p.Source
}

// Run is the transcripts of one run.
type Run struct {
	ID       string
	Workflow string
	// Workspace is the run's workspace, when known (the run store keeps
	// it; a transcript file does not): requests are judged against it.
	// When empty, the cwd the step's session was opened with stands in.
	Workspace string
	// Steps are the step attempts in order. The permission records of a
	// step may sit on any of its attempts (or be repeated on each): they
	// are matched to requests by tool call id and answer.
	Steps []transcript.Step
	// file, when set, holds the attempts instead of Steps (FromReader).
	file *transcript.Reader
}

// FromFile is the run a transcript file holds, read whole.
func FromFile(f *transcript.File) *Run {
	return &Run{ID: f.RunID, Workflow: f.Workflow, Steps: f.Steps}
}

// FromReader is the run of a transcript file read a step attempt at a
// time as Test goes (twice: first to find where each step's permission
// records are, then to decide), so that a file of any size is tested in
// memory bounded by its largest attempt. Test fills in ID and Workflow.
func FromReader(r *transcript.Reader) *Run {
	return &Run{file: r}
}

// each calls f with every step attempt of the run, in order, and its
// position (for at); it returns the file's header, or nil for a run held
// in memory. f's error is returned as it is.
func (run *Run) each(f func(s *transcript.Step, at int64) error) (*transcript.Header, error) {
	if run.file != nil {
		h, err := run.file.Each(f)
		return &h, err
	}
	for i := range run.Steps {
		if err := f(&run.Steps[i], int64(i)); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// summaries is each, with the attempts' summaries: cheaper for a file.
func (run *Run) summaries(f func(s *transcript.Summary, at int64) error) (*transcript.Header, error) {
	if run.file != nil {
		h, err := run.file.Summaries(f)
		return &h, err
	}
	for i := range run.Steps {
		s := &run.Steps[i]
		if err := f(&transcript.Summary{Step: s.Step, Index: s.Index, Attempt: s.Attempt, Permissions: len(s.Permissions) > 0}, int64(i)); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// at is the step attempt at position p, as each gave it.
func (run *Run) at(p int64) (*transcript.Step, error) {
	if run.file != nil {
		return run.file.At(p)
	}
	return &run.Steps[p], nil
}

// UnreadableError says that the transcripts of a run could not be read:
// the input is bad, no decision was compared. `policy test` exits 2 for it.
type UnreadableError struct {
	RunID string // "" for a file whose header was not read
	Err   error
}

func (e *UnreadableError) Error() string {
	if e.RunID == "" {
		return e.Err.Error()
	}
	return "run " + e.RunID + ": " + e.Err.Error()
}

func (e *UnreadableError) Unwrap() error { return e.Err }

// Where an old answer was read from.
const (
	FromRecord   = "record"   // acpflow's permission record: decision, rule and reason
	FromResponse = "response" // only the answer sent to the agent: the decision is inferred
)

// Answer is one answer to a request: the recorded one or the new one.
type Answer struct {
	Decision policies.Decision `json:"decision"`
	Outcome  string            `json:"outcome"`   // selected or cancelled
	OptionID string            `json:"option_id"` // "" when cancelled
	// Layer and Policy say which layer decided and where its policy was
	// configured (an outer answer's Policy is its file); "" for an answer
	// read from the response.
	Layer  policies.Layer  `json:"layer,omitempty"`
	Policy policies.Source `json:"policy,omitempty"`
	Rule   string          `json:"rule"` // "" for an answer read from the response
	Reason string          `json:"reason,omitempty"`
	// From says where an old answer was read: FromRecord or FromResponse
	// (the decision inferred from the selected option's kind, or cancel).
	From string `json:"from,omitempty"`
}

// Result is one recorded request, decided again.
type Result struct {
	RunID      string `json:"run_id"`
	Workflow   string `json:"workflow"`
	Step       string `json:"step"`
	Index      *int   `json:"index,omitempty"` // the for-each element
	Attempt    int    `json:"attempt"`
	ToolCallID string `json:"tool_call_id"`
	Kind       string `json:"kind"`
	Title      string `json:"title"`
	Command    string `json:"command"`
	// Old is the recorded answer; nil when none was recorded (the
	// transcript ends before it).
	Old *Answer `json:"old"`
	// New is the policy's answer; nil when the request was not decided
	// again (Skipped says why).
	New     *Answer `json:"new"`
	Changed bool    `json:"changed"`
	// SameRule is true when both answers name the same rule.
	SameRule bool   `json:"same_rule"`
	Skipped  string `json:"skipped,omitempty"`
}

// Changed reports whether a new answer differs from an old one: another
// decision, or another outcome. An old answer read from the response
// alone has an inferred decision (a `reject` that found no reject option
// was sent as `cancelled`), so there it is the answer the agent would get
// that is compared: outcome and option.
func Changed(old, new Answer) bool {
	if old.From == FromResponse {
		return old.Outcome != new.Outcome || old.OptionID != new.OptionID
	}
	return old.Decision != new.Decision || old.Outcome != new.Outcome
}

// Pair counts the requests whose old and new decisions are these.
type Pair struct {
	Old   policies.Decision `json:"old"`
	New   policies.Decision `json:"new"`
	Count int               `json:"count"`
}

// Totals sums up a what-if.
type Totals struct {
	Runs        int `json:"runs"`
	Transcripts int `json:"transcripts"` // step attempts read
	Truncated   int `json:"truncated"`   // of them, cut short at their size cap: later requests are not there
	Requests    int `json:"requests"`
	Changed     int `json:"changed"`
	Unchanged   int `json:"unchanged"`
	Skipped     int `json:"skipped"` // not decided again (Result.Skipped)
	// Pairs are the decided requests by old → new decision, in order.
	Pairs []Pair `json:"pairs"`
	// Spawns are the recorded spawns decided again (attempts that
	// recorded none are not counted), SpawnsChanged those of them whose
	// child would get other names, or whose refusal would change.
	Spawns        int `json:"spawns"`
	SpawnsChanged int `json:"spawns_changed"`
}

// Changes counts what changed: requests and spawns. `policy test` exits 1
// when it is not 0.
func (t Totals) Changes() int { return t.Changed + t.SpawnsChanged }

func (t *Totals) add(r *Result) {
	t.Requests++
	switch {
	case r.Skipped != "":
		t.Skipped++
		return
	case r.Changed:
		t.Changed++
	default:
		t.Unchanged++
	}
	i := slices.IndexFunc(t.Pairs, func(p Pair) bool { return p.Old == r.Old.Decision && p.New == r.New.Decision })
	if i < 0 {
		t.Pairs = append(t.Pairs, Pair{Old: r.Old.Decision, New: r.New.Decision})
		slices.SortFunc(t.Pairs, func(a, b Pair) int {
			if c := compareStrings(string(a.Old), string(b.Old)); c != 0 {
				return c
			}
			return compareStrings(string(a.New), string(b.New))
		})
		i = slices.IndexFunc(t.Pairs, func(p Pair) bool { return p.Old == r.Old.Decision && p.New == r.New.Decision })
	}
	t.Pairs[i].Count++
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Tester re-decides the requests of runs under one set of policies,
// keeping the totals. It is not safe for concurrent use.
type Tester struct {
	pol    *Policies
	totals Totals
}

// New returns a Tester deciding under p.
func New(p *Policies) *Tester {
	return &Tester{pol: p, totals: Totals{Pairs: []Pair{}}}
}

// Totals returns the totals of every run tested so far.
func (t *Tester) Totals() Totals {
	tot := t.totals
	tot.Pairs = slices.Clone(tot.Pairs)
	return tot
}

// Report is where Test hands its results, each as it is decided: a step
// attempt's spawn, then its requests. A nil func is not called.
type Report struct {
	Request func(*Result) error
	Spawn   func(*SpawnResult) error
}

// Test re-decides every recorded spawn and permission request of run, in
// transcript order, and hands each result to report. An error from report
// stops the test and is returned; transcripts that cannot be read are an
// *UnreadableError, found before anything is reported.
//
// # Notes
//
// A run is read twice: first to find which attempts hold each step's
// permission records and, when the run names no workspace, the first cwd
// of its sessions; then to decide. A step's records are read when its
// first attempt is decided and dropped after its last, so a run read from
// a file (FromReader) is held one attempt and one step's records at a
// time.
func (t *Tester) Test(ctx context.Context, run *Run, report Report) error {
	plan, err := t.plan(ctx, run)
	if err != nil {
		return err
	}
	t.totals.Runs++
	pools := map[string]*recordPool{}
	var stopped error // report's or ctx's error: returned as it is
	_, err = run.each(func(s *transcript.Step, at int64) error {
		pool, err := plan.pool(run, pools, s, at)
		if err != nil {
			return err
		}
		if err := t.testAttempt(ctx, run, s, pool, plan, report); err != nil {
			var ue *UnreadableError
			if !errors.As(err, &ue) {
				stopped = err
			}
			return err
		}
		if last, ok := plan.last[s.Step]; ok && last == at {
			delete(pools, s.Step)
		}
		return nil
	})
	switch {
	case stopped != nil:
		return stopped
	case err != nil:
		return &UnreadableError{RunID: run.ID, Err: err}
	}
	return nil
}

// testAttempt decides one step attempt's spawn and requests again.
func (t *Tester) testAttempt(ctx context.Context, run *Run, s *transcript.Step, pool *recordPool, plan *runPlan, report Report) error {
	t.totals.Transcripts++
	if s.Truncated {
		t.totals.Truncated++
	}
	if s.Spawn != nil && !t.pol.NoSpawns {
		if err := t.testSpawn(ctx, run, s, report.Spawn); err != nil {
			return err
		}
	}
	if t.pol.Permission == nil {
		return nil
	}
	reqs, _ := scan(s)
	for _, req := range reqs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if req.cwd == "" {
			cwd, err := plan.fallbackCwd(run)
			if err != nil {
				return &UnreadableError{RunID: run.ID, Err: err}
			}
			req.cwd = cwd
		}
		res := t.decide(ctx, run, s, req, pool)
		t.totals.add(res)
		if report.Request != nil {
			if err := report.Request(res); err != nil {
				return err
			}
		}
	}
	return nil
}

// runPlan is what the first read of a run finds.
type runPlan struct {
	// records are, per step, the positions of its attempts that hold
	// permission records, in order; last the position of the last
	// attempt of each step that has records.
	records map[string][]int64
	last    map[string]int64
	// fallback is the cwd of a step that opened no session: the run's
	// workspace, else the first cwd a session of the run was opened with,
	// looked for when first needed (most steps open their own session).
	fallback      string
	fallbackKnown bool
}

// fallbackCwd is the plan's fallback, found when first asked.
func (p *runPlan) fallbackCwd(run *Run) (string, error) {
	if p.fallbackKnown {
		return p.fallback, nil
	}
	found := errors.New("found")
	_, err := run.summaries(func(_ *transcript.Summary, at int64) error {
		s, err := run.at(at)
		if err != nil {
			return err
		}
		if _, p.fallback = scan(s); p.fallback != "" {
			return found
		}
		return nil
	})
	if err != nil && err != found {
		return "", err
	}
	p.fallbackKnown = true
	return p.fallback, nil
}

// plan reads run once: where the permission records are, and for a file
// its header (run id, workflow), checked whole.
func (t *Tester) plan(ctx context.Context, run *Run) (*runPlan, error) {
	p := &runPlan{records: map[string][]int64{}, last: map[string]int64{}, fallback: run.Workspace, fallbackKnown: run.Workspace != ""}
	h, err := run.summaries(func(sum *transcript.Summary, at int64) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if sum.Permissions {
			p.records[sum.Step] = append(p.records[sum.Step], at)
		}
		if _, ok := p.records[sum.Step]; ok {
			p.last[sum.Step] = at
		}
		return nil
	})
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		return nil, &UnreadableError{RunID: run.ID, Err: err}
	}
	if h != nil {
		run.ID, run.Workflow = h.RunID, h.Workflow
	}
	return p, nil
}

// pool is the permission records of s's step, read when its first attempt
// comes (s, at position at, is the attempt being decided) and kept in
// pools until its last.
func (p *runPlan) pool(run *Run, pools map[string]*recordPool, s *transcript.Step, at int64) (*recordPool, error) {
	if pool := pools[s.Step]; pool != nil {
		return pool, nil
	}
	pool := &recordPool{}
	for _, pos := range p.records[s.Step] {
		holder := s
		if pos != at {
			var err error
			if holder, err = run.at(pos); err != nil {
				return nil, err
			}
		}
		pool.add(holder.Permissions)
	}
	if _, ok := p.records[s.Step]; ok {
		pools[s.Step] = pool
	}
	return pool, nil
}

// testSpawn decides one recorded spawn again and reports it.
func (t *Tester) testSpawn(ctx context.Context, run *Run, s *transcript.Step, each func(*SpawnResult) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	res := t.decideSpawn(ctx, run, s)
	t.totals.Spawns++
	if res.Changed {
		t.totals.SpawnsChanged++
	}
	if each == nil {
		return nil
	}
	return each(res)
}

// decide rebuilds one request, asks the policy and compares.
func (t *Tester) decide(ctx context.Context, run *Run, s *transcript.Step, r *recorded, pool *recordPool) *Result {
	res := &Result{
		RunID: run.ID, Workflow: run.Workflow, Step: s.Step, Index: s.Index, Attempt: s.Attempt,
		ToolCallID: string(r.params.ToolCall.ToolCallId),
	}
	if r.invalid != nil {
		res.Skipped = "the agent's request was invalid, so no policy was asked: " + r.invalid.Error()
		return res
	}
	workspace := run.Workspace
	if workspace == "" {
		workspace = r.cwd
	}
	req := acpagent.FromACP(policies.Request{
		Workflow: run.Workflow, RunID: run.ID, Step: s.Step, Agent: s.Agent, Workspace: workspace, Cwd: r.cwd,
	}, r.params)
	res.Kind, res.Title, res.Command = req.Tool.Kind, req.Tool.Title, req.Tool.Command

	rec := pool.take(req.Tool.ID, r.answer)
	switch {
	case rec != nil:
		res.Old = &Answer{Decision: rec.Decision, Outcome: rec.Outcome, OptionID: rec.OptionID,
			Layer: rec.Layer, Policy: rec.Policy, Rule: rec.Rule, Reason: rec.Reason, From: FromRecord}
	case r.answer != nil:
		res.Old = &Answer{Outcome: r.answer.outcome, OptionID: r.answer.optionID, From: FromResponse}
		if d, ok := inferDecision(r.answer, req.Options); ok {
			res.Old.Decision = d
		} else {
			res.Old.Reason = "the option answered is not one the agent offered"
		}
	}
	switch {
	case res.Old != nil && policies.AnsweredItself(res.Old.Rule):
		res.Skipped = "answered by acpflow itself (" + res.Old.Rule + "), no policy was asked"
		return res
	case r.afterCancel:
		res.Skipped = "the turn was cancelled before the request: acpflow answered cancelled, no policy was asked"
		return res
	case r.errorAnswer:
		res.Skipped = "the request was answered with an error, no policy was asked"
		return res
	case res.Old == nil:
		res.Skipped = "no answer was recorded (the transcript ends before it)"
		return res
	}
	perm, src := t.pol.forStep(s.Step)
	rec2 := t.pol.Outer.Answer(ctx, perm, src, req)
	res.New = &Answer{Decision: rec2.Decision, Outcome: rec2.Outcome, OptionID: rec2.OptionID,
		Layer: rec2.Layer, Policy: rec2.Policy, Rule: rec2.Rule, Reason: rec2.Reason}
	res.Changed = Changed(*res.Old, *res.New)
	res.SameRule = res.Old.From == FromRecord && res.Old.Rule == res.New.Rule && sameLayer(res.Old, res.New)
	return res
}

// sameLayer reports whether two answers came from the same layer and file:
// rule 1 of the outer file is not rule 1 of the workflow's policy. A
// record from before layers existed says nothing, and was the workflow's.
func sameLayer(old, new *Answer) bool {
	layer := func(a *Answer) policies.Layer {
		if a.Layer == "" {
			return policies.LayerWorkflow
		}
		return a.Layer
	}
	if layer(old) != layer(new) {
		return false
	}
	return layer(new) != policies.LayerOuter || old.Policy == new.Policy
}

// inferDecision is the decision an answer sent to the agent stands for:
// the kind of the option selected (allow_once is allow), or cancel; false
// when the option is not one the agent offered.
func inferDecision(a *response, options []policies.Option) (policies.Decision, bool) {
	if a.outcome != policies.OutcomeSelected {
		return policies.Cancel, true
	}
	for _, o := range options {
		if o.ID == a.optionID {
			return policies.DecisionOf(o.Kind)
		}
	}
	return "", false
}

// recordPool is a step's permission records, each matched to at most one
// request.
type recordPool struct {
	recs []policies.PermissionRecord
	used []bool
}

func (p *recordPool) add(recs []policies.PermissionRecord) {
	p.recs = append(p.recs, recs...)
	p.used = append(p.used, make([]bool, len(recs))...)
}

// take returns the first unused record of tool call id whose answer is
// the one the agent received (when it is known), and marks it used. Tool
// call ids repeat across the sessions of a step's attempts and elements
// (the demo agent numbers call_1, call_2 in each), so the id alone may
// name the wrong one.
func (p *recordPool) take(id string, sent *response) *policies.PermissionRecord {
	for i := range p.recs {
		r := &p.recs[i]
		if p.used[i] || r.ToolCallID != id {
			continue
		}
		if sent != nil && (r.Outcome != sent.outcome || r.OptionID != sent.optionID) {
			continue
		}
		p.used[i] = true
		return r
	}
	return nil
}

// recorded is one session/request_permission found in a transcript.
type recorded struct {
	params      acp.RequestPermissionRequest
	invalid     error     // the params did not decode or validate, as the SDK would refuse them
	cwd         string    // of the last session opened before it
	afterCancel bool      // a session/cancel was sent before it
	answer      *response // the answer sent, when recorded
	errorAnswer bool      // an error was sent instead
}

// response is the answer acpflow sent to a permission request.
type response struct {
	outcome  string // selected or cancelled
	optionID string
}

// Byte patterns that decide which messages are decoded at all: most of a
// transcript is session/update notifications, which a what-if never reads.
var (
	patPermission = []byte(`"` + acp.ClientMethodSessionRequestPermission + `"`)
	patMethod     = []byte(`"method"`)
	patCwd        = []byte(`"cwd"`)
	patCancel     = []byte(`"` + acp.AgentMethodSessionCancel + `"`)
)

// envelope is the part of a JSON-RPC message a what-if reads.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result *struct {
		Outcome struct {
			Outcome  string `json:"outcome"`
			OptionID string `json:"optionId"`
		} `json:"outcome"`
	} `json:"result"`
	Error json.RawMessage `json:"error"`
}

// scan finds the permission requests of one attempt, each with its cwd and
// the answer acpflow sent, and the first cwd a session was opened with
// ("" when none was). The agent's requests and acpflow's have ids of their
// own, so an answer to the agent (to_agent, no method) is matched with the
// agent's open request of the same id.
func scan(s *transcript.Step) (out []*recorded, firstCwd string) {
	var (
		open      = map[string]*recorded{}
		cwd       string
		cancelled bool
	)
	for _, m := range s.Messages {
		msg := m.Msg
		switch m.Dir {
		case transcript.FromAgent:
			if !bytes.Contains(msg, patPermission) {
				continue
			}
			var env envelope
			if gojson.Unmarshal(msg, &env) != nil || env.Method != acp.ClientMethodSessionRequestPermission {
				continue
			}
			r := &recorded{cwd: cwd, afterCancel: cancelled}
			// As the SDK reads a request's params (proc.handle, decodeParams):
			// encoding/json, then Validate.
			if err := json.Unmarshal(env.Params, &r.params); err != nil {
				r.invalid = err
			} else if err := r.params.Validate(); err != nil {
				r.invalid = err
			}
			out = append(out, r)
			if len(env.ID) > 0 {
				open[idKey(env.ID)] = r
			}
		case transcript.ToAgent:
			hasMethod := bytes.Contains(msg, patMethod)
			if hasMethod && !bytes.Contains(msg, patCwd) && !bytes.Contains(msg, patCancel) {
				continue
			}
			var env envelope
			if gojson.Unmarshal(msg, &env) != nil {
				continue
			}
			switch env.Method {
			case acp.AgentMethodSessionNew, acp.AgentMethodSessionLoad, acp.AgentMethodSessionResume, acp.AgentMethodSessionFork:
				var p struct {
					Cwd string `json:"cwd"`
				}
				if gojson.Unmarshal(env.Params, &p) == nil && p.Cwd != "" {
					cwd = p.Cwd
					if firstCwd == "" {
						firstCwd = cwd
					}
				}
			case acp.AgentMethodSessionCancel:
				cancelled = true
			case "":
				if len(env.ID) == 0 {
					continue
				}
				k := idKey(env.ID)
				r := open[k]
				if r == nil {
					continue
				}
				delete(open, k)
				switch {
				case env.Result != nil:
					r.answer = &response{outcome: env.Result.Outcome.Outcome, optionID: env.Result.Outcome.OptionID}
				case len(env.Error) > 0:
					r.errorAnswer = true
				}
			}
		}
	}
	return out, firstCwd
}

// idKey is a JSON-RPC id as a map key: its JSON text, so 1 and "1" differ.
func idKey(raw json.RawMessage) string {
	return string(bytes.TrimSpace(raw))
}
