package steps

import (
	"encoding/json"
	"math"
	"testing"
)

// Sums of usage stay numbers that can be written and read back, whatever
// the records summed hold. Classes of input covered: token sums past
// int64 (held at its bound, never wrapped negative), cost sums past the
// largest float (held there, never +Inf, which JSON cannot hold), and
// ordinary sums (0.1+0.2 is 0.3).
func TestUsageSumsSaturateInsteadOfOverflowing(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	for _, tc := range []struct {
		name   string
		parts  []*Usage
		tokens int64
		amount float64
	}{
		{"ordinary counts and costs add", []*Usage{
			{TotalTokens: n(1000), Cost: &Cost{Amount: 0.1, Currency: "USD"}},
			{TotalTokens: n(250), Cost: &Cost{Amount: 0.2, Currency: "USD"}},
		}, 1250, 0.3},
		{"token counts past int64 are held at its bound", []*Usage{
			{TotalTokens: n(math.MaxInt64 - 5), Cost: &Cost{Amount: 1, Currency: "USD"}},
			{TotalTokens: n(10), Cost: &Cost{Amount: 1, Currency: "USD"}},
			{TotalTokens: n(math.MaxInt64), Cost: &Cost{Amount: 1, Currency: "USD"}},
		}, math.MaxInt64, 3},
		{"costs past the largest float are held there", []*Usage{
			{TotalTokens: n(1), Cost: &Cost{Amount: 1e308, Currency: "USD"}},
			{TotalTokens: n(1), Cost: &Cost{Amount: 1e308, Currency: "USD"}},
			{TotalTokens: n(1), Cost: &Cost{Amount: 1e300, Currency: "USD"}},
		}, 3, math.MaxFloat64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sum := &Usage{}
			for _, p := range tc.parts {
				sum.Add(p)
			}
			if got, _ := sum.Tokens(); got != tc.tokens {
				t.Errorf("tokens %d, want %d", got, tc.tokens)
			}
			if sum.Cost.Amount != tc.amount {
				t.Errorf("cost %v, want %v", sum.Cost.Amount, tc.amount)
			}
			if _, err := json.Marshal(sum); err != nil {
				t.Errorf("the sum cannot be written: %v", err)
			}
		})
	}
}
