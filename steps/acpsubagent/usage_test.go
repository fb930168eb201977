package acpsubagent

import (
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acpflow/acpflow/steps"
)

// What an agent reports of its usage is counted only as far as it can be:
// a negative count is none, and a cost in a currency that is not a code
// (control characters, a kilobyte of text) or of a negative amount is no
// cost, so it reaches neither the terminal nor a budget.
func TestAnAgentsUsageIsBoundedWhereItComesIn(t *testing.T) {
	c := &client{inv: &steps.Invocation{Events: steps.Discard{}}}
	c.turnUsage(&acp.Usage{InputTokens: -5000, OutputTokens: 20, TotalTokens: -4980})
	u := c.turnUsageSoFar()
	if u == nil || *u.InputTokens != 0 || *u.OutputTokens != 20 || *u.TotalTokens != 0 {
		t.Errorf("negative counts: %+v, want them as 0", u)
	}
	for _, bad := range []acp.Cost{
		{Amount: 1, Currency: "USD\x1b]52;c;aGk=\x07"},
		{Amount: 1, Currency: "USDUSDUSDUSDUSDUSD"},
		{Amount: 1, Currency: ""},
		{Amount: -3, Currency: "USD"},
	} {
		c.usageUpdated(&acp.SessionUsageUpdate{Cost: &bad})
		if c.usage.Cost != nil {
			t.Errorf("cost %+v was counted as %+v", bad, c.usage.Cost)
		}
	}
	c.usageUpdated(&acp.SessionUsageUpdate{Cost: &acp.Cost{Amount: 0.25, Currency: "USD"}})
	if c.usage.Cost == nil || c.usage.Cost.Amount != 0.25 || c.usage.Cost.Currency != "USD" {
		t.Errorf("a cost in USD: %+v", c.usage.Cost)
	}
}
