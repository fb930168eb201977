package acpsubagent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/acpflow/acpflow/internal/gateway"
	"github.com/acpflow/acpflow/internal/transcript"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
	"github.com/acpflow/acpflow/steps/redact"
)

// settleLimit bounds how long a step whose turn ended waits for the
// reports of the model requests still in flight.
const settleLimit = 2 * time.Second

// gatewayPlan is how one attempt's agent is pointed at its gateway: the
// agent's `gateway:` with the preset's wiring, and the key, rendered.
type gatewayPlan struct {
	cfg      *steps.Gateway
	wiring   acpagent.GatewayWiring
	upstream string
	key      string
}

// planGateway resolves the agent's gateway before its env is decided (nil
// without one). The key is read now, so that a missing one fails the step
// before anything is spawned.
func (a *attempt) planGateway() (*gatewayPlan, error) {
	cfg := a.agent.Gateway
	if cfg == nil {
		return nil, nil
	}
	w, _ := acpagent.GatewayOf(a.agent.Preset)
	if cfg.API != "" {
		w.API = cfg.API
	}
	if cfg.BaseURLEnv != "" {
		w.BaseURLEnv, w.Configure = cfg.BaseURLEnv, nil
	}
	if cfg.KeyEnv != "" {
		w.KeyEnv = cfg.KeyEnv
	}
	where := "agents." + a.agent.Name + ".gateway"
	if w.API == "" || w.KeyEnv == "" || (w.BaseURLEnv == "" && w.Configure == nil) {
		return nil, fmt.Errorf("%s: the agent is not pointed at a gateway by a preset; set api, base-url-env and key-env", where)
	}
	plan := &gatewayPlan{cfg: cfg, wiring: w, upstream: cfg.Upstream}
	if plan.upstream == "" {
		plan.upstream = steps.DefaultUpstream[w.API]
	}
	if a.replay != nil {
		plan.key = replayKey()
		a.scribe.Add([]string{plan.key})
		return plan, nil
	}
	key, err := a.gatewayKey(plan, where)
	if err != nil {
		return nil, err
	}
	plan.key = key
	a.scribe.Add([]string{key})
	a.secrets = append(a.secrets, key)
	return plan, nil
}

// gatewayKey is the provider key: gateway.key rendered, else the
// wiring's variable in acpflow's own environment.
func (a *attempt) gatewayKey(plan *gatewayPlan, where string) (string, error) {
	if plan.cfg.Key == "" {
		key := strings.TrimSpace(a.inv.Ambient[plan.wiring.KeyEnv])
		if key == "" {
			return "", fmt.Errorf("%s: no provider key: %s is not set in acpflow's environment (set it, or give gateway.key)", where, plan.wiring.KeyEnv)
		}
		return key, nil
	}
	pieces, err := redact.RenderPieces(plan.cfg.Key, a.render)
	if err != nil {
		return "", fmt.Errorf("%s.key: %w", where, err)
	}
	key := strings.TrimSpace(redact.Joined(pieces))
	if key == "" {
		return "", fmt.Errorf("%s.key: no provider key: %s rendered empty (is the variable set in acpflow's environment?)", where, plan.cfg.Key)
	}
	return key, nil
}

// hidden reports whether the env policy must neither see nor pass name:
// under a gateway the wiring's variables are acpflow's to set.
func (a *attempt) hidden(name string) bool {
	return a.gwPlan != nil && slices.Contains(a.gwPlan.wiring.Vars(), name)
}

// visibleAmbient is acpflow's environment as the env policy may see it.
func (a *attempt) visibleAmbient() map[string]string {
	if a.gwPlan == nil {
		return a.inv.Ambient
	}
	out := maps.Clone(a.inv.Ambient)
	for _, k := range a.gwPlan.wiring.Vars() {
		delete(out, k)
	}
	return out
}

// gatewayRoute is a process's gateway and the step it serves now: a
// reused agent keeps its gateway for its life, and each step that uses it
// gets the exchanges of its own turn.
type gatewayRoute struct {
	g           *gateway.Gateway
	placeholder string
	// model is what a step using the process keeps of its model side
	// when the gateway records (nil: it does not): the agent, its API and
	// upstream; replay is the recording the gateway forwards to instead
	// of the provider (nil: none).
	model  *transcript.Model
	replay *modelReplay

	mu  sync.Mutex
	cur *gatewayTurn
}

// gatewayTurn is what one attempt learnt from the gateway.
type gatewayTurn struct {
	inv *steps.Invocation
	// scribe keeps the exchanges when the gateway records.
	scribe *scribe
	// end cancels the attempt's turn with a cause; ended is the refusal
	// (or the replay's divergence) it was ended on (nil: none).
	end   context.CancelCauseFunc
	ended error

	mu        sync.Mutex
	usage     steps.Usage
	metered   bool
	exchanges int
	last      *gateway.Exchange
}

// startGateway starts the process's gateway and points env at it; args
// are the agent's, as spawned, which a recording keeps. A replay's
// gateway forwards to the recording instead of the provider.
func (a *attempt) startGateway(env map[string]string, args []string) (*gatewayRoute, error) {
	plan := a.gwPlan
	r := &gatewayRoute{placeholder: gateway.NewPlaceholder()}
	if plan.cfg.Record {
		r.model = &transcript.Model{Agent: a.modelAgent(plan, args), API: plan.wiring.API, Upstream: plan.upstream}
	}
	upstream := plan.upstream
	if a.replay != nil {
		var err error
		if r.replay, upstream, err = a.replay.start(plan); err != nil {
			return nil, fmt.Errorf("agents.%s: %w", a.agent.Name, err)
		}
	}
	g, err := gateway.Start(gateway.Config{
		Provider: plan.wiring.API, Upstream: upstream, Key: plan.key, Placeholder: r.placeholder,
		Prices: plan.cfg.Prices, Allow: r.allow, OnExchange: r.exchange, Record: plan.cfg.Record,
		Retry: gateway.Retry{Attempts: plan.cfg.Retry},
	})
	if err != nil {
		r.replay.close()
		return nil, fmt.Errorf("agents.%s.gateway: %w", a.agent.Name, err)
	}
	r.g = g
	a.scribe.Add([]string{r.placeholder})
	if err := pointAtGateway(plan, env, g.URL(), r.placeholder); err != nil {
		r.close()
		return nil, fmt.Errorf("agents.%s.gateway: %w", a.agent.Name, err)
	}
	return r, nil
}

// pointAtGateway gives the agent the gateway's URL and the placeholder
// where the wiring says, and makes sure the key itself is in no variable.
func pointAtGateway(plan *gatewayPlan, env map[string]string, url, placeholder string) error {
	w := plan.wiring
	for _, k := range w.DropEnv {
		delete(env, k)
	}
	env[w.KeyEnv] = placeholder
	for _, k := range w.PlaceholderEnv {
		env[k] = placeholder
	}
	if w.BaseURLEnv != "" {
		env[w.BaseURLEnv] = url
	}
	if w.Configure != nil {
		if err := w.Configure(w.API, env, url, placeholder); err != nil {
			return err
		}
	}
	for k, v := range env {
		if strings.Contains(v, plan.key) {
			env[k] = strings.ReplaceAll(v, plan.key, placeholder)
		}
	}
	return nil
}

// attach makes the attempt the one the gateway reports to.
func (r *gatewayRoute) attach(inv *steps.Invocation, end context.CancelCauseFunc, sc *scribe) *gatewayTurn {
	t := &gatewayTurn{inv: inv, end: end, scribe: sc}
	r.mu.Lock()
	r.cur = t
	r.mu.Unlock()
	return t
}

// detach ends t's reports, after the requests in flight have reported.
func (r *gatewayRoute) detach(t *gatewayTurn) {
	r.g.Settle(settleLimit)
	r.mu.Lock()
	if r.cur == t {
		r.cur = nil
	}
	r.mu.Unlock()
}

func (r *gatewayRoute) current() *gatewayTurn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur
}

// errBetweenSteps refuses a model request no step would count: the
// agent's step has ended (it is being torn down, or waits in the pool).
var errBetweenSteps = errors.New("no step is using this agent now, and a request between steps would be spent where no budget counts it")

// allow is the gateway's budget check: the budget of the run (and batch)
// whose step uses the agent now.
func (r *gatewayRoute) allow() error {
	t := r.current()
	if t == nil {
		return errBetweenSteps
	}
	if t.inv.BudgetReached != nil {
		return t.inv.BudgetReached()
	}
	return nil
}

// exchange counts a finished request in the step's usage and records it.
func (r *gatewayRoute) exchange(x gateway.Exchange) {
	t := r.current()
	if t == nil {
		return // between steps: no step's to count
	}
	t.mu.Lock()
	t.exchanges++
	t.last = &x
	var end error
	if t.ended == nil {
		if err := r.replay.diverged(); err != nil {
			end = err
		} else if final(&x) {
			end = refusalError(&x)
		}
		t.ended = end
	}
	if r.model != nil {
		t.scribe.exchange(recordedExchange(&x), x.Started)
	}
	var report *steps.Usage
	if x.Metered {
		t.metered = true
		t.usage.Add(stepUsage(x.Model, x.Usage))
		t.usage.Source = steps.SourceGateway
		report = t.usage.Clone()
	}
	t.mu.Unlock()
	t.inv.Emit(acpagent.ExchangeEvent(x))
	if report != nil {
		t.inv.Emit(steps.UsageReport{Usage: *report})
	}
	if end != nil && t.end != nil {
		t.end(end)
	}
}

// final reports whether a model request was refused for good: a key the
// provider does not take, a spent quota or a spent budget are refused
// again on every retry (the gateway sends the same key), so the turn is
// ended at once rather than after the agent's own retries (claude retries
// a 401 with backoff until the step times out). A rate limit, an overload
// or a refused path (an agent's probe) are left to the agent.
func final(x *gateway.Exchange) bool {
	if x.Refusal != nil {
		return x.Refusal.Kind == gateway.RefusedBudget
	}
	if x.Error == nil {
		return false
	}
	k := x.Error.Kind()
	return k == gateway.ErrorAuthentication || k == gateway.ErrorQuota
}

// close stops the gateway once the agent's group is gone, and the
// recording it forwarded to; nil has none.
func (r *gatewayRoute) close() {
	if r != nil {
		if r.g != nil {
			r.g.Close()
		}
		r.replay.close()
	}
}

// recordedExchange is x as a transcript keeps it.
func recordedExchange(x *gateway.Exchange) transcript.Exchange {
	rx := transcript.Exchange{Method: x.Method, Path: x.Path, Model: x.Model, Status: x.Status,
		ContentType: x.ContentType, Request: x.Request, Response: x.Response,
		RequestTruncated: x.RequestCut, ResponseTruncated: x.ResponseCut}
	if x.Refusal != nil {
		rx.Refused = x.Refusal.Kind
	}
	return rx
}

// stepUsage is one exchange's usage in a step's terms.
func stepUsage(model string, u gateway.Usage) *steps.Usage {
	n := func(v int64) *int64 { return &v }
	su := &steps.Usage{
		InputTokens: n(u.Input), OutputTokens: n(u.Output), TotalTokens: n(u.Tokens()),
		Models: map[string]gateway.Usage{model: u}, Source: steps.SourceGateway,
	}
	// The kinds the provider did not use are left out, as an agent's.
	for _, k := range []struct {
		v   int64
		dst **int64
	}{{u.Thoughts, &su.ThoughtTokens}, {u.CacheRead, &su.CachedReadTokens}, {u.CacheWrite, &su.CachedWriteTokens}} {
		if k.v > 0 {
			*k.dst = n(k.v)
		}
	}
	if u.Cost != nil {
		su.Cost = &steps.Cost{Amount: *u.Cost, Currency: "USD"}
	}
	return su
}

// result is what the turn's exchanges say of the step: its usage, when
// the gateway metered any (it replaces the agent's), and why the step
// failed when its last model request did.
func (t *gatewayTurn) result() (*steps.Usage, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var u *steps.Usage
	if t.metered {
		u = t.usage.Clone()
	}
	if t.last == nil {
		return u, nil
	}
	return u, refusalError(t.last)
}

// refusalError names why a model request failed, nil when it did not.
func refusalError(x *gateway.Exchange) error {
	switch {
	case x.Refusal != nil && x.Refusal.Kind == gateway.RefusedBudget:
		return fmt.Errorf("budget reached: the model gateway refused the agent's request (%s)", x.Refusal.Message)
	case x.Refusal != nil:
		return fmt.Errorf("the model gateway refused the agent's request: %s", x.Refusal.Message)
	case x.Error != nil:
		e := x.Error
		msg := fmt.Sprintf("the provider refused: %s (%d): %s", strings.ReplaceAll(e.Kind(), "-", " "), e.Status, e.Type)
		if e.Message != "" {
			msg += ": " + e.Message
		}
		return errors.New(msg)
	}
	return nil
}

// useGateway makes the attempt the one p's gateway (if any) reports to,
// and its placeholder a secret of the attempt's records.
func (a *attempt) useGateway(p *proc) {
	if p.gateway == nil {
		return
	}
	a.scribe.Add([]string{p.gateway.placeholder})
	if m := p.gateway.model; m != nil {
		a.scribe.recordModel(*m)
	}
	a.gwTurn = p.gateway.attach(a.inv, a.endTurn, a.scribe)
	a.metered.Store(true)
}

// gatewayResult puts what the gateway saw in the step's result: the
// provider's usage in place of the agent's, and a turn that ended on a
// failed model request failed, naming why (the agent's own words are
// then an apology at best).
func (a *attempt) gatewayResult(res *steps.Result) {
	if a.gwTurn == nil {
		return
	}
	a.p.gateway.detach(a.gwTurn)
	a.p.gateway.replay.settle(a, res)
	// The agent's own figures are not the step's, even when the gateway
	// metered nothing (no model request ended): unknown, never the
	// agent's word. What its context holds is the agent's to say.
	u, err := a.gwTurn.result()
	if u != nil && res.Usage != nil {
		u.ContextTokens, u.ContextSize = res.Usage.ContextTokens, res.Usage.ContextSize
	}
	res.Usage = u
	if err == nil {
		return
	}
	a.gwTurn.mu.Lock()
	ended := a.gwTurn.ended
	a.gwTurn.mu.Unlock()
	if ended != nil {
		// acpflow ended the turn on the refusal: that is the step's error.
		res.StopReason, res.Err = steps.Error, ended
		return
	}
	switch {
	case res.StopReason == steps.Completed:
		res.StopReason, res.Err = steps.Error, err
	case res.Err != nil && !strings.Contains(res.Err.Error(), err.Error()):
		res.Err = fmt.Errorf("%w\n%s", res.Err, err)
	case res.Err == nil:
		res.Err = err
	}
}

// meteredSink drops the usage the agent reports of itself once a gateway
// meters its step: the provider's word replaces it, for the budgets too.
type meteredSink struct {
	next steps.Sink
	a    *attempt
}

func (m meteredSink) Emit(ev steps.Event) {
	if u, ok := ev.Data.(steps.UsageReport); ok && m.a.metered.Load() && u.Source != steps.SourceGateway {
		return
	}
	m.next.Emit(ev)
}
