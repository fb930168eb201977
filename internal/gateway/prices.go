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
// billed as output); Thoughts is kept to show how much of it they were,
// as CacheWrite1h is within CacheWrite.
type Usage struct {
	Input      int64 `json:"input_tokens"`
	Output     int64 `json:"output_tokens"`
	CacheRead  int64 `json:"cache_read_tokens"`
	CacheWrite int64 `json:"cache_write_tokens"`
	Thoughts   int64 `json:"thought_tokens,omitempty"`
	// CacheWrite1h is the part of CacheWrite that Anthropic keeps for an
	// hour, priced apart.
	CacheWrite1h int64 `json:"cache_write_1h_tokens,omitempty"`
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
	u.CacheWrite1h = clamp(u.CacheWrite1h + o.CacheWrite1h)
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
	// CacheWrite1h is Anthropic's price of a cache write that lasts an
	// hour; 0 prices those at CacheWrite.
	CacheWrite1h float64 `json:"cache_write_1h,omitempty"`
}

// Prices is a price table by model name.
type Prices map[string]Price

// DefaultPrices is a small table of current models at their list prices
// for standard requests (not batch, not long-context tiers), as the
// providers published them in December 2026. It is a starting point: a
// price the user gives wins, and a model not in it is metered in tokens
// without a cost.
func DefaultPrices() Prices {
	return Prices{
		// Anthropic: cache writes of 5 minutes and of 1 hour (Claude Code
		// writes most of its cache with the hour).
		"claude-opus-5-5":   {Input: 4, Output: 20, CacheRead: 0.2, CacheWrite: 5, CacheWrite1h: 8},
		"claude-opus-5":     {Input: 5, Output: 25, CacheRead: 0.5, CacheWrite: 6.25, CacheWrite1h: 10},
		"claude-sonnet-5-5": {Input: 2, Output: 10, CacheRead: 0.2, CacheWrite: 2.5, CacheWrite1h: 4},
		"claude-sonnet-5":   {Input: 2, Output: 10, CacheRead: 0.2, CacheWrite: 2.5, CacheWrite1h: 4},
		"claude-opus-4-5":   {Input: 5, Output: 25, CacheRead: 0.5, CacheWrite: 6.25, CacheWrite1h: 10},
		"claude-sonnet-4-5": {Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75, CacheWrite1h: 6},
		"claude-haiku-4-5":  {Input: 1, Output: 5, CacheRead: 0.1, CacheWrite: 1.25, CacheWrite1h: 2},
		// OpenAI: cached input is the read; there is no write charge.
		"gpt-5.5":     {Input: 5, Output: 30, CacheRead: 0.5},
		"gpt-5.4":     {Input: 2.5, Output: 15, CacheRead: 0.25},
		"gpt-5":       {Input: 1.25, Output: 10, CacheRead: 0.125},
		"gpt-5-mini":  {Input: 0.25, Output: 2, CacheRead: 0.025},
		"gpt-4.1":     {Input: 2, Output: 8, CacheRead: 0.5},
		"gpt-4o":      {Input: 2.5, Output: 10, CacheRead: 1.25},
		"gpt-4o-mini": {Input: 0.15, Output: 0.6, CacheRead: 0.075},
		// Gemini: prompts up to 200k tokens; cache storage is not metered.
		// 3.8 Flash is at its launch price, which Google says doubles on
		// 2027-01-01.
		"gemini-3.8-flash":      {Input: 0.75, Output: 3.75, CacheRead: 0.075},
		"gemini-2.5-pro":        {Input: 1.25, Output: 10, CacheRead: 0.125},
		"gemini-2.5-flash":      {Input: 0.3, Output: 2.5, CacheRead: 0.03},
		"gemini-2.5-flash-lite": {Input: 0.1, Output: 0.4, CacheRead: 0.01},
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
		for _, v := range []float64{pr.Input, pr.Output, pr.CacheRead, pr.CacheWrite, pr.CacheWrite1h} {
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
// model rather than another model: a date (20250929, 2024-08-06, 0613) or
// latest. "7" or "7-20270101" is another model ("claude-sonnet-5-7").
func isSnapshot(tail string) bool {
	if tail == "latest" {
		return true
	}
	digits := strings.Trim(tail, "0123456789") == ""
	switch len(tail) {
	case 4, 8:
		return digits
	case 10:
		return tail[4] == '-' && tail[7] == '-' && strings.Trim(tail, "0123456789-") == "" &&
			strings.Count(tail, "-") == 2
	}
	return false
}

// cost is what u costs at pr, in USD.
func (pr Price) cost(u Usage) float64 {
	hour := pr.CacheWrite1h
	if hour == 0 {
		hour = pr.CacheWrite
	}
	c := float64(u.Input)*pr.Input + float64(u.Output)*pr.Output + float64(u.CacheRead)*pr.CacheRead +
		float64(u.CacheWrite-u.CacheWrite1h)*pr.CacheWrite + float64(u.CacheWrite1h)*hour
	return math.Round(c/1e6*1e9) / 1e9
}
