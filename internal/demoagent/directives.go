package demoagent

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/coder/acp-go-sdk"
)

// Directives are the lines of a prompt that change what the demo agent answers, so that what
// a real model would do can be tried offline: `json: TEXT` (answer TEXT alone, for
// output-schema) and `usage: input=N output=N cost=X currency=C` (report usage, for budget:).
type Directives struct {
	// JSON is the text of the first `json:` line, trimmed; the final message is exactly it.
	// It is not checked to be JSON, so that a malformed answer can be tried too.
	JSON    string
	HasJSON bool

	// Usage is what the first `usage:` line says, nil without one.
	Usage *Usage
}

// Usage is a `usage:` directive: the turn's tokens, sent in the prompt response's usage as
// an adapter does, and its cost, added to the session's and sent in a usage_update.
type Usage struct {
	Input, Output int64
	Cost          float64 // of this turn; 0 with HasCost false sends no cost
	HasCost       bool
	Currency      string // ISO 4217; USD unless the line says otherwise
}

// contextSize is the context window the demo agent reports in a usage_update: a real
// adapter's figure, of no meaning offline.
const contextSize = 200000

// maxDirectiveTokens bounds a token count in a usage: line: 2^53-1, as acpflow counts them.
const maxDirectiveTokens = 1<<53 - 1

// ParseDirectives reads the directives of a prompt: lines that, trimmed, start with "json:"
// or "usage:". The first of each counts. A usage: line that cannot be read is an error,
// which the demo agent returns for the turn (invalid params), naming the field.
func ParseDirectives(prompt string) (Directives, error) {
	var d Directives
	for line := range strings.Lines(prompt) {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, "json:"); ok && !d.HasJSON {
			d.JSON, d.HasJSON = strings.TrimSpace(rest), true
			continue
		}
		if rest, ok := strings.CutPrefix(line, "usage:"); ok && d.Usage == nil {
			u, err := parseUsage(rest)
			if err != nil {
				return d, err
			}
			d.Usage = u
		}
	}
	return d, nil
}

// parseUsage reads the fields of a usage: line: input=N output=N cost=X currency=C, each
// optional, in any order.
func parseUsage(fields string) (*Usage, error) {
	u := &Usage{Currency: "USD"}
	if strings.TrimSpace(fields) == "" {
		return nil, fmt.Errorf("usage: line has no fields; write e.g. usage: input=1200 output=300 cost=0.02")
	}
	for _, f := range strings.Fields(fields) {
		key, value, ok := strings.Cut(f, "=")
		if !ok {
			return nil, fmt.Errorf("usage: %q is not key=value (keys: input, output, cost, currency)", f)
		}
		switch key {
		case "input", "output":
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil || n < 0 || n > maxDirectiveTokens {
				return nil, fmt.Errorf("usage: %s=%s: want a whole number of tokens from 0", key, value)
			}
			if key == "input" {
				u.Input = n
			} else {
				u.Output = n
			}
		case "cost":
			x, err := strconv.ParseFloat(value, 64)
			if err != nil || x < 0 || math.IsInf(x, 0) || math.IsNaN(x) {
				return nil, fmt.Errorf("usage: cost=%s: want an amount from 0, such as 0.02", value)
			}
			u.Cost, u.HasCost = x, true
		case "currency":
			if len(value) != 3 || strings.ToUpper(value) != value {
				return nil, fmt.Errorf("usage: currency=%s: want an ISO 4217 code such as USD", value)
			}
			u.Currency = value
		default:
			return nil, fmt.Errorf("usage: unknown field %q (keys: input, output, cost, currency)", key)
		}
	}
	return u, nil
}

// promptUsage is the prompt response's usage for u: the turn's own tokens.
func (u *Usage) promptUsage() *acp.Usage {
	return &acp.Usage{InputTokens: int(u.Input), OutputTokens: int(u.Output), TotalTokens: int(u.Input + u.Output)}
}

// update is the usage_update a real adapter sends at the end of a turn: the context's tokens
// and, when the line gives a cost, the session's cumulative cost (sessionCost, this turn's
// included), which acpflow turns back into the turn's own.
func (u *Usage) update(sessionCost float64) acp.SessionUpdate {
	uu := &acp.SessionUsageUpdate{Used: int(u.Input + u.Output), Size: contextSize}
	if u.HasCost {
		uu.Cost = &acp.Cost{Amount: sessionCost, Currency: u.Currency}
	}
	return acp.SessionUpdate{UsageUpdate: uu}
}
