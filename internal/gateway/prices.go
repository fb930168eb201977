package gateway

import (
	"fmt"
	"math"
	"strings"
)

// Usage is what the provider's answers said they cost: tokens by kind,
// and the cost in USD from the price table.
//
// # Notes
//
// Input is the input not read from a cache, whatever the provider's own
// field holds: OpenAI and Gemini count cached tokens inside the prompt,
// Anthropic beside it, and the gateway takes them out so that
// Input+CacheRead+CacheWrite is the whole input for every provider and
// each kind has one price. Output includes Thoughts (reasoning tokens are
// billed as output); Thoughts is kept to show how much of it they were.
type Usage struct {
	Input      int64 `json:"input_tokens"`
	Output     int64 `json:"output_tokens"`
	CacheRead  int64 `json:"cache_read_tokens"`
	CacheWrite int64 `json:"cache_write_tokens"`
	Thoughts   int64 `json:"thought_tokens,omitempty"`
	// Cost is in USD; nil when the model is not in the price table (the
	// tokens are still counted).
	Cost *float64 `json:"cost_usd,omitempty"`
}

// Tokens is all input and output tokens.
func (u Usage) Tokens() int64 { return u.Input + u.Output + u.CacheRead + u.CacheWrite }

// Add adds o to u. A sum has a cost when either part has one: the part
// without is a model the table does not price, and its tokens still show.
func (u *Usage) Add(o Usage) {
	u.Input = clamp(u.Input + o.Input)
	u.Output = clamp(u.Output + o.Output)
	u.CacheRead = clamp(u.CacheRead + o.CacheRead)
	u.CacheWrite = clamp(u.CacheWrite + o.CacheWrite)
	u.Thoughts = clamp(u.Thoughts + o.Thoughts)
	if o.Cost != nil {
		c := *o.Cost
		if u.Cost != nil {
			c += *u.Cost
		}
		c = math.Round(c*1e9) / 1e9
		u.Cost = &c
	}
}

// Price is what a model costs, in USD per million tokens of each kind.
type Price struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cache_read"`
	CacheWrite float64 `json:"cache_write"`
}

// Prices is a price table by model name.
type Prices map[string]Price

// DefaultPrices is a small table of current models at their list prices
// for standard (not batch, not long-context) requests, as published by
// the providers in late 2025. It is a starting point: a price the user
// gives wins, and a model not in it is metered in tokens without a cost.
func DefaultPrices() Prices {
	return Prices{
		// Anthropic: cache writes are the 5-minute ones.
		"claude-opus-4-5":   {5, 25, 0.5, 6.25},
		"claude-opus-4-1":   {15, 75, 1.5, 18.75},
		"claude-opus-4":     {15, 75, 1.5, 18.75},
		"claude-sonnet-4-5": {3, 15, 0.3, 3.75},
		"claude-sonnet-4":   {3, 15, 0.3, 3.75},
		"claude-3-7-sonnet": {3, 15, 0.3, 3.75},
		"claude-haiku-4-5":  {1, 5, 0.1, 1.25},
		"claude-3-5-haiku":  {0.8, 4, 0.08, 1},
		// OpenAI: cached input is the read; there is no write charge.
		"gpt-5.1":      {1.25, 10, 0.125, 0},
		"gpt-5":        {1.25, 10, 0.125, 0},
		"gpt-5-codex":  {1.25, 10, 0.125, 0},
		"gpt-5-mini":   {0.25, 2, 0.025, 0},
		"gpt-5-nano":   {0.05, 0.4, 0.005, 0},
		"gpt-4.1":      {2, 8, 0.5, 0},
		"gpt-4.1-mini": {0.4, 1.6, 0.1, 0},
		"gpt-4o":       {2.5, 10, 1.25, 0},
		"gpt-4o-mini":  {0.15, 0.6, 0.075, 0},
		"o3":           {2, 8, 0.5, 0},
		"o4-mini":      {1.1, 4.4, 0.275, 0},
		// Gemini: prompts up to 200k tokens; cache storage is not metered.
		"gemini-3-pro-preview":  {2, 12, 0.2, 0},
		"gemini-2.5-pro":        {1.25, 10, 0.125, 0},
		"gemini-2.5-flash":      {0.3, 2.5, 0.03, 0},
		"gemini-2.5-flash-lite": {0.1, 0.4, 0.01, 0},
	}
}

// With is p with over's entries added or replacing p's; it refuses a
// price that is negative or not a number.
func (p Prices) With(over Prices) (Prices, error) {
	out := make(Prices, len(p)+len(over))
	for m, pr := range p {
		out[m] = pr
	}
	for m, pr := range over {
		for _, v := range []float64{pr.Input, pr.Output, pr.CacheRead, pr.CacheWrite} {
			if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("gateway: price of model %q: %v is not a price per million tokens", m, v)
			}
		}
		out[m] = pr
	}
	return out, nil
}

// Of is the price of model: its own entry, else the entry it is a dated
// snapshot of ("claude-sonnet-4-5-20250929", "gpt-4o-2024-08-06", a
// "-latest" alias). Nothing else is guessed: a new model with a familiar
// prefix ("claude-opus-4-7") has no price rather than an older one's.
func (p Prices) Of(model string) (Price, bool) {
	model = strings.TrimPrefix(model, "models/")
	if pr, ok := p[model]; ok {
		return pr, true
	}
	best, found := "", false
	for m := range p {
		rest, ok := strings.CutPrefix(model, m+"-")
		if ok && isSnapshot(rest) && len(m) > len(best) {
			best, found = m, true
		}
	}
	return p[best], found
}

// isSnapshot reports whether a model name's tail names a snapshot of the
// model rather than another model: a date (digits and dashes, at least
// four digits: "20250929", "2024-08-06", "0613"; a "7" is a version) or
// latest.
func isSnapshot(tail string) bool {
	if tail == "latest" {
		return true
	}
	if tail == "" || tail[0] < '0' || tail[0] > '9' || strings.Trim(tail, "0123456789-") != "" {
		return false
	}
	return len(strings.ReplaceAll(tail, "-", "")) >= 4
}

// cost is what u costs at pr, in USD.
func (pr Price) cost(u Usage) float64 {
	c := float64(u.Input)*pr.Input + float64(u.Output)*pr.Output +
		float64(u.CacheRead)*pr.CacheRead + float64(u.CacheWrite)*pr.CacheWrite
	return math.Round(c/1e6*1e9) / 1e9
}
