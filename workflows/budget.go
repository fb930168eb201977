package workflows

import (
	"regexp"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/steps"
)

var (
	budgetKeys = []string{"tokens", "cost"}
	costKeys   = []string{"amount", "currency"}
	// currencyPattern is an ISO 4217 code, as ACP reports costs in.
	currencyPattern = regexp.MustCompile(`^[A-Z]{3}$`)
)

// decodeBudget reads `budget: {tokens: N, cost: {amount: X, currency: USD}}`:
// what one run may spend (docs/workflow.md#budget).
func (d *decoder) decodeBudget(n *node) engine.Budget {
	var b engine.Budget
	f := d.fields(n, "budget", budgetKeys)
	if f == nil {
		return b
	}
	if len(f) == 0 {
		d.at(n.pos, "budget: set tokens, cost or both (an empty budget limits nothing)")
	}
	if t := f["tokens"]; t != nil {
		if v, ok := d.integer(t, "budget: tokens", 1); ok {
			b.Tokens = int64(v)
		}
	}
	if c := f["cost"]; c != nil {
		cf := d.fields(c, "budget: cost", costKeys)
		if cf == nil {
			return b
		}
		cost := steps.Cost{}
		ok := true
		switch a := cf["amount"]; {
		case a == nil:
			d.at(c.pos, "budget: cost: missing amount (e.g. amount: 5)")
			ok = false
		default:
			var v float64
			switch x := a.value.(type) {
			case int:
				v = float64(x)
			case float64:
				v = x
			default:
				d.wrong(a, "budget: cost: amount: want a number greater than 0, got %s", a.describe())
				ok = false
			}
			if ok && !(v > 0) {
				d.at(a.pos, "budget: cost: amount: want a number greater than 0, got %v", v)
				ok = false
			}
			cost.Amount = v
		}
		switch cu := cf["currency"]; {
		case cu == nil:
			d.at(c.pos, "budget: cost: missing currency (an ISO 4217 code such as USD)")
			ok = false
		default:
			s, sok := d.str(cu, "budget: cost: currency")
			if sok && !currencyPattern.MatchString(s) {
				d.at(cu.pos, "budget: cost: currency: want an ISO 4217 code such as USD, got %q", s)
				sok = false
			}
			ok = ok && sok
			cost.Currency = s
		}
		if ok {
			b.Cost = &cost
		}
	}
	return b
}
