package engine

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/acpflow/acpflow/steps"
)

func n(v int64) *int64 { return &v }

func TestABudgetSaysWhenAndByHowMuchItIsExceeded(t *testing.T) {
	usd := &steps.Cost{Amount: 5, Currency: "USD"}
	for _, tc := range []struct {
		name   string
		budget Budget
		spent  *steps.Usage
		want   string
	}{
		{"tokens under", Budget{Tokens: 10_000}, &steps.Usage{TotalTokens: n(10_000)}, ""},
		{"tokens over", Budget{Tokens: 10_000}, &steps.Usage{TotalTokens: n(12_345)}, "budget exceeded: 12,345 tokens of 10,000"},
		{"no tokens reported is not zero, and not over", Budget{Tokens: 1}, &steps.Usage{Cost: usd}, ""},
		{"cost over", Budget{Cost: usd}, &steps.Usage{Cost: &steps.Cost{Amount: 5.12, Currency: "USD"}}, "budget exceeded: 5.12 USD of 5.00 USD"},
		{"cost in another currency", Budget{Cost: usd}, &steps.Usage{Cost: &steps.Cost{Amount: 1, Currency: "EUR"}},
			`budget: cost is limited in USD, but an agent reported a cost in "EUR", which cannot be counted against it`},
		{"nothing reported", Budget{Tokens: 1, Cost: usd}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if err := tc.budget.Check("", tc.spent); err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("Check = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseBudgetTakesTokensAndCostAndRefusesTheRest(t *testing.T) {
	b, err := ParseBudget("tokens=100_000,cost=0.50EUR")
	if err != nil || b.Tokens != 100000 || b.Cost == nil || b.Cost.Amount != 0.5 || b.Cost.Currency != "EUR" {
		t.Fatalf("ParseBudget = %+v, %v", b, err)
	}
	if s := b.String(); s != "tokens=100000,cost=0.5EUR" {
		t.Errorf("String = %q", s)
	}
	for _, bad := range []string{"", "tokens", "tokens=0", "tokens=-5", "cost=5", "cost=USD", "cost=0USD", "cost=5usd", "cost=5DOLLARS", "money=5USD", "tokens=10,tokens=20", "cost=1USD,cost=2USD"} {
		if _, err := ParseBudget(bad); err == nil {
			t.Errorf("ParseBudget(%q) took it", bad)
		}
	}
}

func TestARunsUsageSumsWhatWasReportedAndCountsTheStepsThatReportedNothing(t *testing.T) {
	a := &steps.Usage{InputTokens: n(750), OutputTokens: n(250), TotalTokens: n(1000), Cost: &steps.Cost{Amount: 0.1, Currency: "USD"}, ContextTokens: n(5)}
	b := &steps.Usage{TotalTokens: n(20), Cost: &steps.Cost{Amount: 0.2, Currency: "USD"}}
	context := &steps.Usage{ContextTokens: n(900)} // codex: context only
	sum := SumUsage([]*steps.Usage{a, b, context, nil, nil}, []bool{true, true, true, true, false})
	if sum == nil || *sum.TotalTokens != 1020 || *sum.InputTokens != 750 || sum.Cost.Amount != 0.3 || sum.ContextTokens != nil {
		t.Fatalf("sum = %+v", sum)
	}
	if sum.UnreportedSteps != 2 {
		t.Errorf("unreported = %d, want 2 (the context-only step and the silent one; the skipped one did not run)", sum.UnreportedSteps)
	}
	if SumUsage([]*steps.Usage{nil, nil}, []bool{true, true}) != nil {
		t.Error("a run whose steps reported nothing has a usage")
	}
}

// A cost prints in a few characters whatever its amount: a stored 1e308
// printed 309 digits. Classes of input covered: ordinary amounts (two to
// six decimals), amounts of a billion and more (six significant digits),
// the largest float, a negative amount, and NaN.
func TestFormatCostIsBounded(t *testing.T) {
	for _, tc := range []struct {
		amount float64
		want   string
	}{
		{0, "0.00 USD"},
		{0.25, "0.25 USD"},
		{0.000183, "0.000183 USD"},
		{999999999.5, "999999999.50 USD"},
		{1e9, "1e+09 USD"},
		{1.5e12, "1.5e+12 USD"},
		{1e308, "1e+308 USD"},
		{math.MaxFloat64, "1.79769e+308 USD"},
		{-2e10, "-2e+10 USD"},
		{math.NaN(), "NaN USD"},
	} {
		if got := FormatCost(steps.Cost{Amount: tc.amount, Currency: "USD"}); got != tc.want || len(got) > 24 {
			t.Errorf("FormatCost(%v) = %q, want %q", tc.amount, got, tc.want)
		}
	}
}

// Reached stops spending once a budget is used whole, a request before
// Check (which cancels the run) says it is exceeded.
func TestBudgetReachedOnceUsedWhole(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	b := Budget{Tokens: 150, Cost: &steps.Cost{Amount: 1, Currency: "USD"}}
	for _, tc := range []struct {
		spent *steps.Usage
		want  string
	}{
		{nil, ""},
		{&steps.Usage{TotalTokens: n(149)}, ""},
		{&steps.Usage{TotalTokens: n(150)}, "batch budget reached: 150 tokens of 150"},
		{&steps.Usage{TotalTokens: n(151)}, "batch budget exceeded: 151 tokens of 150"},
		{&steps.Usage{Cost: &steps.Cost{Amount: 1, Currency: "USD"}}, "batch budget reached: 1.00 USD of 1.00 USD"},
	} {
		err := b.Reached("batch", tc.spent)
		if got := fmt.Sprint(err); (err == nil) != (tc.want == "") || (err != nil && got != tc.want) {
			t.Errorf("Reached(%v) = %v, want %q", tc.spent, err, tc.want)
		}
		if err != nil && !errors.Is(err, ErrBudgetExceeded) {
			t.Errorf("Reached's error is not ErrBudgetExceeded")
		}
	}
}
