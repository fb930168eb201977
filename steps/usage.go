package steps

import (
	"maps"
	"math"

	"github.com/acpflow/acpflow/internal/gateway"
)

// Usage is what a step's agent reported of the tokens and money its turn
// cost (docs/results.md#usage). A field is nil when the agent reported
// nothing of it: nothing reported is unknown, never zero.
//
// # Notes
//
// ACP carries usage in two unstable places: the prompt response's `usage`
// (token counts of the turn) and `usage_update` notifications (the
// session's cumulative cost, and how many tokens the context holds). The
// token fields come from the first, Cost from the second, made the step's
// own (the session's cost when the turn began subtracted), and Context*
// from the last usage_update (what the context holds, not what was spent:
// never summed).
type Usage struct {
	InputTokens       *int64 `json:"input_tokens,omitempty"`
	OutputTokens      *int64 `json:"output_tokens,omitempty"`
	TotalTokens       *int64 `json:"total_tokens,omitempty"`
	ThoughtTokens     *int64 `json:"thought_tokens,omitempty"`
	CachedReadTokens  *int64 `json:"cached_read_tokens,omitempty"`
	CachedWriteTokens *int64 `json:"cached_write_tokens,omitempty"`
	Cost              *Cost  `json:"cost,omitempty"`
	ContextTokens     *int64 `json:"context_tokens,omitempty"`
	ContextSize       *int64 `json:"context_size,omitempty"`
	// Source says who counted it: "gateway" when acpflow's model gateway
	// metered the provider's answers (docs/gateway.md); "" when the agent
	// reported it.
	Source string `json:"source,omitempty"`
	// Models is the gateway's count by model (empty without a gateway).
	Models map[string]gateway.Usage `json:"models,omitempty"`
}

// SourceGateway is Usage.Source for usage the model gateway metered.
const SourceGateway = "gateway"

// Cost is an amount of money in an ISO 4217 currency.
type Cost struct {
	Amount   float64 `json:"amount"`
	Currency string  `json:"currency"`
}

// Tokens is the usage's total token count and whether the agent reported one.
func (u *Usage) Tokens() (int64, bool) {
	if u == nil || u.TotalTokens == nil {
		return 0, false
	}
	return *u.TotalTokens, true
}

// Empty reports whether nothing was reported at all.
func (u *Usage) Empty() bool {
	return u == nil || (u.InputTokens == nil && u.OutputTokens == nil && u.TotalTokens == nil &&
		u.ThoughtTokens == nil && u.CachedReadTokens == nil && u.CachedWriteTokens == nil &&
		u.Cost == nil && u.ContextTokens == nil && u.ContextSize == nil && len(u.Models) == 0)
}

// Add adds o to u, field by field: a field is known in the sum when it is
// known in either. Costs add only in the same currency; a cost in another
// currency is left out of the sum (the caller that cares checks
// SameCurrency first). Context fields are not summed: the sum keeps o's
// when it has them, the latest.
func (u *Usage) Add(o *Usage) {
	if o == nil {
		return
	}
	// A sum keeps its parts' source when they share one.
	if u.Empty() {
		u.Source = o.Source
	} else if u.Source != o.Source {
		u.Source = ""
	}
	add := func(dst **int64, v *int64) {
		if v == nil {
			return
		}
		if *dst == nil {
			*dst = new(int64)
		}
		**dst = saturatingAdd(**dst, *v)
	}
	add(&u.InputTokens, o.InputTokens)
	add(&u.OutputTokens, o.OutputTokens)
	add(&u.TotalTokens, o.TotalTokens)
	add(&u.ThoughtTokens, o.ThoughtTokens)
	add(&u.CachedReadTokens, o.CachedReadTokens)
	add(&u.CachedWriteTokens, o.CachedWriteTokens)
	if o.Cost != nil {
		switch {
		case u.Cost == nil:
			c := *o.Cost
			u.Cost = &c
		case u.Cost.Currency == o.Cost.Currency:
			u.Cost.Amount = roundCost(u.Cost.Amount + o.Cost.Amount)
		}
	}
	if o.ContextTokens != nil {
		u.ContextTokens, u.ContextSize = o.ContextTokens, o.ContextSize
	}
	for m, mu := range o.Models {
		if u.Models == nil {
			u.Models = map[string]gateway.Usage{}
		}
		t := u.Models[m]
		t.Add(mu)
		u.Models[m] = t
	}
}

// Clone is a deep copy of u (nil for nil).
func (u *Usage) Clone() *Usage {
	if u == nil {
		return nil
	}
	c := &Usage{}
	c.Add(u)
	c.ContextTokens, c.ContextSize = ptr(u.ContextTokens), ptr(u.ContextSize)
	c.Source, c.Models = u.Source, maps.Clone(u.Models)
	return c
}

func ptr(p *int64) *int64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// roundCost keeps a sum of binary fractions to the 1e-9 that a currency
// amount is ever reported in, so that 0.1+0.2 prints as 0.3. A sum too
// large for that (only a record written before acpflow bounded what it
// takes from an agent holds one) stays as it is, held at the largest
// float: an infinite or NaN amount cannot be written as JSON.
func roundCost(x float64) float64 {
	if r := math.Round(x*1e9) / 1e9; !math.IsInf(r, 0) && !math.IsNaN(r) {
		return r
	}
	if math.IsNaN(x) {
		return 0
	}
	return math.Max(-math.MaxFloat64, math.Min(x, math.MaxFloat64))
}

// saturatingAdd is a+b, held at the int64 bounds instead of wrapping
// round: a sum of many steps' counts never turns negative.
func saturatingAdd(a, b int64) int64 {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}

// UsageReport is a step's usage so far, sent each time the agent reports
// more (a usage_update, the prompt's response): what the live view and
// the budgets follow. It is the step attempt's own, not the run's.
type UsageReport struct {
	Usage
}

func (UsageReport) EventType() string  { return "step_update" }
func (UsageReport) UpdateKind() string { return "usage" }
