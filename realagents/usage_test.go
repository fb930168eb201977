//go:build realagents

package realagents_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acpflow/acpflow/realagents/modelserver"
)

// Issue 15's usage on every agent that completes whole turns: the model
// server reports known token counts in each API's own fields, and what
// reaches a step's `usage` is what the agent passes on of them, per agent
// as measured (claude-agent-acp 0.23.1, codex-acp 0.16.0, gemini 0.61.0):
//
//   - claude passes the counts on in the prompt response, per turn (it
//     counts each prompt from zero), and its cost in usage_update, per
//     session (so a continued step's cost is its own by subtraction);
//   - codex sends only usage_update with the tokens its context holds,
//     no counts and no cost: its tokens are unknown;
//   - gemini sends its counts only under the prompt response's _meta
//     (which ACP reserves and acpflow does not read): all unknown.

// scriptedUsage is what every model reply of the test reports.
var scriptedUsage = modelserver.Usage{Input: 1200, Output: 34, CacheRead: 5, CacheWrite: 6}

// usageStep is a step's result with its usage.
type usageStep struct {
	Status string `json:"status"`
	Usage  *struct {
		InputTokens       *int64 `json:"input_tokens"`
		OutputTokens      *int64 `json:"output_tokens"`
		TotalTokens       *int64 `json:"total_tokens"`
		CachedReadTokens  *int64 `json:"cached_read_tokens"`
		CachedWriteTokens *int64 `json:"cached_write_tokens"`
		Cost              *struct {
			Amount   float64 `json:"amount"`
			Currency string  `json:"currency"`
		} `json:"cost"`
		ContextTokens *int64 `json:"context_tokens"`
	} `json:"usage"`
}

func TestEachStepsUsageIsWhatTheAgentPassesOnOfTheModelServers(t *testing.T) {
	forEachTurnAgent(t, func(t *testing.T, s *sandbox, ta *turnAgent) {
		srv := startServer(t, modelserver.Script{{Say: "Noted.", Usage: &scriptedUsage}})
		plan, next := "Remember the word "+word("HERON")+".", "What was the word?"
		res, _, r := s.sessionFlow(ta, srv, twoSteps(plan, next, true, ""))
		if r.code != 0 {
			t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
		}
		raw := s.acpflow(time.Minute, "show", res.RunID, "--json", "--state", filepath.Join(s.dir, "state.db"))
		var detail struct {
			Usage map[string]any       `json:"usage"`
			Steps map[string]usageStep `json:"steps"`
		}
		if err := json.Unmarshal([]byte(raw.stdout), &detail); err != nil {
			t.Fatalf("show --json: %v\n%s", err, raw.stdout)
		}
		reqs := srv.Requests()
		nextTurns := len(turnsOf(t, reqs, next))
		turns := map[string]int{"plan": len(turnsOf(t, reqs, plan)) - nextTurns, "next": nextTurns}
		text := s.acpflow(time.Minute, "show", res.RunID, "--state", filepath.Join(s.dir, "state.db")).stdout
		for _, id := range []string{"plan", "next"} {
			st := detail.Steps[id]
			b, _ := json.Marshal(st.Usage)
			t.Logf("%s: %d model turn(s), usage %s", id, turns[id], b)
			u := st.Usage
			switch ta.name {
			case "claude":
				k := int64(turns[id])
				want := map[string]int64{"input": 1200 * k, "output": 34 * k, "cache read": 5 * k, "cache write": 6 * k, "total": 1245 * k}
				if u == nil || u.InputTokens == nil || u.OutputTokens == nil || u.CachedReadTokens == nil || u.CachedWriteTokens == nil || u.TotalTokens == nil {
					t.Fatalf("%s: usage %s, want every token count", id, b)
				}
				got := map[string]int64{"input": *u.InputTokens, "output": *u.OutputTokens, "cache read": *u.CachedReadTokens, "cache write": *u.CachedWriteTokens, "total": *u.TotalTokens}
				for k, v := range want {
					if got[k] != v {
						t.Errorf("%s: %s tokens %d, want %d (the model server's, for this step's turn alone)", id, k, got[k], v)
					}
				}
				if u.Cost == nil || u.Cost.Currency != "USD" || u.Cost.Amount <= 0 {
					t.Errorf("%s: cost %s, want a USD amount", id, b)
				}
			case "codex":
				// codex's `used` is the last model response's total_tokens.
				want := int64(scriptedUsage.Input + scriptedUsage.CacheRead + scriptedUsage.Output)
				if u == nil || u.ContextTokens == nil || *u.ContextTokens != want {
					t.Errorf("%s: usage %s, want context_tokens %d, what codex reports", id, b, want)
				} else if u.TotalTokens != nil || u.Cost != nil {
					t.Errorf("%s: usage %s has counts or a cost codex never sent", id, b)
				}
			case "gemini":
				if u != nil {
					t.Errorf("%s: usage %s, want none: gemini reports its counts only under _meta", id, b)
				}
			}
		}
		switch ta.name {
		case "claude":
			p, n := detail.Steps["plan"].Usage, detail.Steps["next"].Usage
			if p != nil && n != nil && p.Cost != nil && n.Cost != nil && turns["plan"] == turns["next"] && n.Cost.Amount > 1.5*p.Cost.Amount {
				t.Errorf("next's cost %v is not its own turn's (plan's was %v): the session's total?", n.Cost.Amount, p.Cost.Amount)
			}
			if detail.Usage["total_tokens"] != float64(1245*(turns["plan"]+turns["next"])) || detail.Usage["unreported_steps"] != nil {
				t.Errorf("the run's usage %v, want the steps' sum", detail.Usage)
			}
		case "codex":
			if detail.Usage["total_tokens"] != nil || detail.Usage["unreported_steps"] != 2.0 {
				t.Errorf("the run's usage %v, want no tokens and 2 steps unreported", detail.Usage)
			}
			if !strings.Contains(text, "  usage: tokens unknown; context ") {
				t.Errorf("show does not say codex's tokens are unknown:\n%s", text)
			}
		case "gemini":
			if detail.Usage != nil {
				t.Errorf("the run's usage %v, want none", detail.Usage)
			}
			if strings.Count(text, "  usage: unknown\n") != 2 || !strings.Contains(text, "  usage:     unknown\n") {
				t.Errorf("show does not say unknown for gemini:\n%s", text)
			}
		}
	})
}
