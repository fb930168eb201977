package acpsubagent

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// What an agent reports of its usage is read here, by acpflow, and not by
// the SDK: the SDK's types hold token counts in an int, so a count of 7.5
// or 1e300 fails its decode of the whole prompt response (the turn's
// answer lost to an "Internal error") or of the whole usage_update
// (dropped unsaid). Usage is bookkeeping: a value that is not one acpflow
// can count is dropped, with a warning, and the turn's result stands.

// maxTokens is the largest token count acpflow takes from an agent:
// 2^53-1, the largest whole number every JSON reader holds exactly
// (JavaScript's Number.MAX_SAFE_INTEGER), and far beyond any real turn.
const maxTokens = 1<<53 - 1

// maxCost is the largest cost amount acpflow takes from an agent, in any
// currency: a thousand billion, far beyond any real session, so that sums
// stay finite and print in a few characters.
const maxCost = 1e12

// promptAnswer is session/prompt's response as acpflow reads it: the stop
// reason typed as the SDK types it, the usage kept as sent (readTurnUsage).
type promptAnswer struct {
	StopReason acp.StopReason  `json:"stopReason"`
	Usage      json.RawMessage `json:"usage"`
}

// turnCounts is what a prompt response's usage says, each count nil
// where it said none that can be counted.
type turnCounts struct {
	input, output, total, thought, cachedRead, cachedWrite *int64
}

// readTurnUsage reads a prompt response's usage: the counts that are
// whole numbers from 0 to maxTokens, and a problem for each field that
// is not one (field name → what is wrong). ok is false when there is no
// usage at all (absent or null).
func readTurnUsage(raw json.RawMessage) (c turnCounts, problems map[string]string, ok bool) {
	fields, problem, ok := usageObject(raw)
	if !ok {
		return c, nil, false
	}
	problems = map[string]string{}
	if problem != "" {
		problems["usage"] = problem
		return c, problems, true
	}
	for name, dst := range map[string]**int64{
		"inputTokens": &c.input, "outputTokens": &c.output, "totalTokens": &c.total,
		"thoughtTokens": &c.thought, "cachedReadTokens": &c.cachedRead, "cachedWriteTokens": &c.cachedWrite,
	} {
		n, problem := tokenCount(fields[name])
		if problem != "" {
			problems["usage."+name] = problem
		}
		*dst = n
	}
	return c, problems, true
}

// usageUpdate is what a usage_update says: the context's tokens and size,
// and the session's cost; each nil where it said none that can be counted.
type usageUpdate struct {
	used, size *int64
	cost       *acp.Cost
}

// readUsageUpdate reads a usage_update's fields leniently, as
// readTurnUsage does: used and size are token counts; cost is an object
// of an amount from 0 to maxCost and a currency code (countable).
func readUsageUpdate(raw json.RawMessage) (u usageUpdate, problems map[string]string) {
	problems = map[string]string{}
	fields, problem, ok := usageObject(raw)
	if !ok || problem != "" {
		problems["usage_update"] = "not an object"
		return u, problems
	}
	for name, dst := range map[string]**int64{"used": &u.used, "size": &u.size} {
		n, problem := tokenCount(fields[name])
		if problem != "" {
			problems["usage_update."+name] = problem
		}
		*dst = n
	}
	cost, problem, ok := usageObject(fields["cost"])
	switch {
	case !ok:
	case problem != "":
		problems["usage_update.cost"] = problem
	default:
		amount, problem := costAmount(cost["amount"])
		if problem != "" {
			problems["usage_update.cost.amount"] = problem
		}
		currency, problem := currencyCode(cost["currency"])
		if problem != "" {
			problems["usage_update.cost.currency"] = problem
		}
		if amount != nil && currency != "" {
			u.cost = &acp.Cost{Amount: *amount, Currency: currency}
		}
	}
	return u, problems
}

// usageObject reads raw as a JSON object: ok false for absent or null, a
// problem when it is something else than an object.
func usageObject(raw json.RawMessage) (fields map[string]json.RawMessage, problem string, ok bool) {
	if usageNull(raw) {
		return nil, "", false
	}
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return nil, "is " + usageKind(raw) + ", not an object", true
	}
	return fields, "", true
}

// tokenCount reads one token count: nil and no problem when absent or
// null; nil and what is wrong when it is not a whole number from 0 to
// maxTokens (a whole number written with a fraction or an exponent, 1e3
// or 1000.0, is one).
func tokenCount(raw json.RawMessage) (*int64, string) {
	if usageNull(raw) {
		return nil, ""
	}
	f, text, problem := usageNumber(raw)
	switch {
	case problem != "":
		return nil, problem
	case f < 0:
		return nil, text + " is negative"
	case f > maxTokens:
		return nil, text + " is more than " + strconv.FormatInt(maxTokens, 10)
	case f != math.Trunc(f):
		return nil, text + " is not a whole number"
	}
	n := int64(f)
	return &n, ""
}

// costAmount reads a cost's amount: a number from 0 to maxCost.
func costAmount(raw json.RawMessage) (*float64, string) {
	if usageNull(raw) {
		return nil, "is missing"
	}
	f, text, problem := usageNumber(raw)
	switch {
	case problem != "":
		return nil, problem
	case f < 0:
		return nil, text + " is negative"
	case f > maxCost:
		return nil, text + " is more than " + strconv.FormatFloat(maxCost, 'g', -1, 64)
	}
	return &f, ""
}

// currencyCode reads a cost's currency: a string countable takes.
func currencyCode(raw json.RawMessage) (string, string) {
	var s string
	if usageNull(raw) {
		return "", "is missing"
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", "is " + usageKind(raw) + ", not a currency code"
	}
	if !countable(acp.Cost{Currency: s}) {
		return "", "is not a currency code (letters and digits, at most 16)"
	}
	return s, ""
}

// usageNumber reads raw as a finite JSON number, with its text (cut, for a
// warning) or what it is instead.
func usageNumber(raw json.RawMessage) (float64, string, string) {
	text := string(bytes.TrimSpace(raw))
	if usageKind(raw) != "a number" {
		return 0, "", "is " + usageKind(raw) + ", not a number"
	}
	shown := text
	if len(shown) > 24 {
		shown = shown[:24] + "…"
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, "", shown + " is not a finite number"
	}
	return f, shown, ""
}

// usageKind names the kind of JSON value raw is, never its content (an
// agent's string does not reach a warning).
func usageKind(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "nothing"
	}
	switch c := t[0]; {
	case c == '"':
		return "a string"
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case c == '-' || c >= '0' && c <= '9':
		if json.Valid(t) {
			return "a number"
		}
	}
	return "not JSON"
}

func usageNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// usageNotified keeps a usage_update of the client's session and logs it
// as the agent sent it.
func (c *client) usageNotified(sessionID string, update json.RawMessage) {
	if c.gate != nil {
		defer c.gate.handledOne()
	}
	if !c.ours(acp.SessionId(sessionID)) {
		return
	}
	c.inv.Emit(acpagent.AgentUpdate{Kind: "usage_update", Update: update})
	c.usageUpdated(update)
}

// usageUpdated keeps a usage_update: the session's cumulative cost, made
// the turn's own by subtracting what the session had cost when the turn
// began, and what its context holds. An update that says nothing new
// (claude-agent-acp sends `used: null`) reports nothing; what cannot be
// counted is dropped with a warning.
func (c *client) usageUpdated(raw json.RawMessage) {
	uu, problems := readUsageUpdate(raw)
	c.usageProblems(problems)
	c.mu.Lock()
	before := c.usage.Clone()
	if uu.used != nil && *uu.used > 0 {
		c.usage.ContextTokens, c.usage.ContextSize = uu.used, uu.size
	}
	if uu.cost != nil {
		cost := *uu.cost
		c.lastCost = &cost
		own := steps.Cost{Amount: cost.Amount, Currency: cost.Currency}
		if b := c.costBase; b != nil && b.Currency == cost.Currency {
			own.Amount = max(cost.Amount-b.Amount, 0)
		}
		c.usage.Cost = &own
	}
	changed := !sameUsage(before, &c.usage)
	report := c.usage.Clone()
	c.mu.Unlock()
	if changed {
		c.inv.Emit(steps.UsageReport{Usage: *report})
	}
}

// turnUsage keeps the prompt response's usage: the turn's token counts.
// ACP's field says "for this turn" (its members' comments say "across all
// turns"); claude-agent-acp 0.23.1, the one agent that sends it, counts
// each prompt from zero, so it is taken as the turn's. A count that
// cannot be counted is dropped with a warning (unknown, never 0).
func (c *client) turnUsage(raw json.RawMessage) {
	counts, problems, ok := readTurnUsage(raw)
	c.usageProblems(problems)
	if !ok {
		return
	}
	c.mu.Lock()
	c.usage.InputTokens, c.usage.OutputTokens, c.usage.TotalTokens = counts.input, counts.output, counts.total
	c.usage.ThoughtTokens, c.usage.CachedReadTokens, c.usage.CachedWriteTokens = counts.thought, counts.cachedRead, counts.cachedWrite
	report := c.usage.Clone()
	c.mu.Unlock()
	if !report.Empty() {
		c.inv.Emit(steps.UsageReport{Usage: *report})
	}
}

// usageProblems warns of the usage fields dropped, each field once per
// client: an agent that sends a bad usage_update with every chunk gets
// one warning for it, not thousands.
func (c *client) usageProblems(problems map[string]string) {
	if len(problems) == 0 {
		return
	}
	c.mu.Lock()
	if c.usageWarned == nil {
		c.usageWarned = map[string]bool{}
	}
	var said []string
	for field, problem := range problems {
		if !c.usageWarned[field] {
			c.usageWarned[field] = true
			said = append(said, field+" "+problem)
		}
	}
	c.mu.Unlock()
	if len(said) == 0 {
		return
	}
	slices.Sort(said)
	c.inv.Emit(steps.Warning{Message: "usage the agent reported was dropped, as it cannot be counted: " + strings.Join(said, "; ")})
}
