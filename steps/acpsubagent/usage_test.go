package acpsubagent

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/steps"
)

// warnings collects the Warning events a client emits.
type warnings struct{ said []string }

func (w *warnings) Emit(e steps.Event) {
	if d, ok := e.Data.(steps.Warning); ok {
		w.said = append(w.said, d.Message)
	}
}

func usageClient() (*client, *warnings) {
	w := &warnings{}
	return &client{inv: &steps.Invocation{Events: w}}, w
}

func countText(p *int64) string {
	if p == nil {
		return "unknown"
	}
	return fmt.Sprint(*p)
}

// A prompt response's usage is read by acpflow, field by field: a count
// that is not a whole number from 0 to 2^53-1 is dropped (unknown, never
// 0) with one warning that names it, and the counts beside it stand.
// Classes of input covered: fractional, negative, just over and far over
// the bound (1e300, beyond int64 and uint64, 1e999 which is no finite
// float), strings (also "NaN" and "Infinity"), booleans, objects, arrays,
// null and absent (unknown, no warning), whole numbers written as 1e3 or
// 1000.0 (counted), and a usage that is no object at all.
func TestAPromptResponsesUsageIsReadFieldByField(t *testing.T) {
	for _, tc := range []struct {
		name, usage          string
		input, output, total string // what is kept
		warned               []string
	}{
		{"whole counts are kept", `{"inputTokens": 750, "outputTokens": 250, "totalTokens": 1000}`, "750", "250", "1000", nil},
		{"whole numbers in other notations are kept", `{"inputTokens": 1e3, "outputTokens": 250.0, "totalTokens": 1250}`, "1000", "250", "1250", nil},
		{"a fractional count is dropped", `{"inputTokens": 1, "outputTokens": 7.5, "totalTokens": 8}`, "1", "unknown", "8", []string{"usage.outputTokens 7.5 is not a whole number"}},
		{"a huge count is dropped", `{"inputTokens": 1, "outputTokens": 2, "totalTokens": 1e300}`, "1", "2", "unknown", []string{"usage.totalTokens 1e300 is more than 9007199254740991"}},
		{"a count beyond int64 is dropped", `{"inputTokens": 9223372036854775808, "outputTokens": 2, "totalTokens": 3}`, "unknown", "2", "3", []string{"usage.inputTokens 9223372036854775808 is more than"}},
		{"a count beyond uint64 is dropped", `{"inputTokens": 1, "outputTokens": 2, "totalTokens": 18446744073709551616}`, "1", "2", "unknown", []string{"usage.totalTokens 18446744073709551616 is more than"}},
		{"a count just over 2^53-1 is dropped", `{"inputTokens": 1, "outputTokens": 2, "totalTokens": 9007199254740992}`, "1", "2", "unknown", []string{"usage.totalTokens 9007199254740992 is more than"}},
		{"no finite number is dropped", `{"inputTokens": 1, "outputTokens": 2, "totalTokens": 1e999}`, "1", "2", "unknown", []string{"usage.totalTokens 1e999 is not a finite number"}},
		{"a negative count is dropped", `{"inputTokens": -5000, "outputTokens": 20, "totalTokens": -4980}`, "unknown", "20", "unknown", []string{"usage.inputTokens -5000 is negative", "usage.totalTokens -4980 is negative"}},
		{"strings are dropped, never shown", `{"inputTokens": "NaN", "outputTokens": "Infinity", "totalTokens": "12\u001b[2J"}`, "unknown", "unknown", "unknown",
			[]string{"usage.inputTokens is a string, not a number", "usage.outputTokens is a string", "usage.totalTokens is a string"}},
		{"other types are dropped", `{"inputTokens": true, "outputTokens": {"n": 1}, "totalTokens": [3]}`, "unknown", "unknown", "unknown",
			[]string{"usage.inputTokens is a boolean", "usage.outputTokens is an object", "usage.totalTokens is an array"}},
		{"null and absent are unknown, unsaid", `{"inputTokens": null, "totalTokens": 5}`, "unknown", "unknown", "5", nil},
		{"a usage that is no object is dropped whole", `"lots"`, "unknown", "unknown", "unknown", []string{"usage is a string, not an object"}},
		{"a usage that is an array is dropped whole", `[1, 2]`, "unknown", "unknown", "unknown", []string{"usage is an array, not an object"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, w := usageClient()
			var answer promptAnswer
			if err := json.Unmarshal([]byte(`{"stopReason": "end_turn", "usage": `+tc.usage+`}`), &answer); err != nil {
				t.Fatalf("the prompt response did not decode: %v", err)
			}
			if answer.StopReason != "end_turn" {
				t.Errorf("stop reason %q", answer.StopReason)
			}
			c.turnUsage(answer.Usage)
			u := c.usage
			if got := [3]string{countText(u.InputTokens), countText(u.OutputTokens), countText(u.TotalTokens)}; got != [3]string{tc.input, tc.output, tc.total} {
				t.Errorf("kept in/out/total %v, want %v", got, [3]string{tc.input, tc.output, tc.total})
			}
			all := strings.Join(w.said, "\n")
			if len(tc.warned) == 0 && len(w.said) > 0 {
				t.Errorf("warned %q of nothing wrong", all)
			}
			if len(tc.warned) > 0 && len(w.said) != 1 {
				t.Errorf("%d warnings, want one for the report:\n%s", len(w.said), all)
			}
			for _, want := range tc.warned {
				if !strings.Contains(all, want) {
					t.Errorf("the warning %q does not say %q", all, want)
				}
			}
			if strings.ContainsRune(all, 0x1b) {
				t.Errorf("the warning holds the agent's string: %q", all)
			}
		})
	}
}

// A usage_update is read by acpflow too: its context counts as token
// counts, its cost as an amount from 0 to 1e12 in a currency code; a cost
// that is not one is dropped whole (an amount without its currency cannot
// be counted), with a warning. Classes of input covered: amounts negative,
// huge (1e308), not finite, as a string, null or missing; currencies with
// control characters, too long, empty, of another type; a cost that is no
// object; used and size fractional or huge; and a warning given once per
// field however many times an agent repeats it.
func TestAUsageUpdateIsReadFieldByField(t *testing.T) {
	for _, tc := range []struct {
		name, update string
		cost         string // kept, as "AMOUNT CUR" or "none"
		context      string // kept, as "USED/SIZE"
		warned       []string
	}{
		{"a cost and context are kept", `{"used": 1000, "size": 200000, "cost": {"amount": 0.25, "currency": "USD"}}`, "0.25 USD", "1000/200000", nil},
		{"claude's used: null says nothing", `{"used": null, "size": 200000}`, "none", "unknown/unknown", nil},
		{"a negative amount is dropped", `{"cost": {"amount": -3, "currency": "USD"}}`, "none", "unknown/unknown", []string{"usage_update.cost.amount -3 is negative"}},
		{"a huge amount is dropped", `{"cost": {"amount": 1e308, "currency": "USD"}}`, "none", "unknown/unknown", []string{"usage_update.cost.amount 1e308 is more than 1e+12"}},
		{"no finite amount is dropped", `{"cost": {"amount": 1e999, "currency": "USD"}}`, "none", "unknown/unknown", []string{"usage_update.cost.amount 1e999 is not a finite number"}},
		{"an amount as a string is dropped", `{"cost": {"amount": "0.25", "currency": "USD"}}`, "none", "unknown/unknown", []string{"usage_update.cost.amount is a string, not a number"}},
		{"a missing amount is dropped", `{"cost": {"currency": "USD"}}`, "none", "unknown/unknown", []string{"usage_update.cost.amount is missing"}},
		{"a currency with an escape is dropped", `{"cost": {"amount": 1, "currency": "USD\u001b]52;c;aGk=\u0007"}}`, "none", "unknown/unknown", []string{"usage_update.cost.currency is not a currency code"}},
		{"a kilobyte of currency is dropped", `{"cost": {"amount": 1, "currency": "` + strings.Repeat("USD", 400) + `"}}`, "none", "unknown/unknown", []string{"usage_update.cost.currency is not a currency code"}},
		{"an empty currency is dropped", `{"cost": {"amount": 1, "currency": ""}}`, "none", "unknown/unknown", []string{"usage_update.cost.currency is not a currency code"}},
		{"a currency of another type is dropped", `{"cost": {"amount": 1, "currency": 840}}`, "none", "unknown/unknown", []string{"usage_update.cost.currency is a number, not a currency code"}},
		{"a cost that is no object is dropped", `{"cost": 0.25}`, "none", "unknown/unknown", []string{"usage_update.cost is a number, not an object"}},
		{"a fractional used is dropped", `{"used": 7.5, "size": 200000}`, "none", "unknown/unknown", []string{"usage_update.used 7.5 is not a whole number"}},
		{"a huge size is dropped, used kept", `{"used": 10, "size": 1e300}`, "none", "10/unknown", []string{"usage_update.size 1e300 is more than"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, w := usageClient()
			for range 3 { // an agent that repeats itself is warned of once
				c.usageUpdated(json.RawMessage(tc.update))
			}
			cost := "none"
			if k := c.usage.Cost; k != nil {
				cost = fmt.Sprintf("%v %s", k.Amount, k.Currency)
			}
			if cost != tc.cost {
				t.Errorf("cost %s, want %s", cost, tc.cost)
			}
			if got := countText(c.usage.ContextTokens) + "/" + countText(c.usage.ContextSize); got != tc.context {
				t.Errorf("context %s, want %s", got, tc.context)
			}
			all := strings.Join(w.said, "\n")
			if len(tc.warned) == 0 && len(w.said) > 0 || len(tc.warned) > 0 && len(w.said) != 1 {
				t.Errorf("%d warnings for three equal updates, want %d:\n%s", len(w.said), min(len(tc.warned), 1), all)
			}
			for _, want := range tc.warned {
				if !strings.Contains(all, want) {
					t.Errorf("the warning %q does not say %q", all, want)
				}
			}
			if strings.ContainsRune(all, 0x1b) {
				t.Errorf("the warning holds the agent's string: %q", all)
			}
		})
	}
}
