//go:build realagents

package realagents_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acpflow/acpflow/internal/modelserver"
)

// Issue 15's usage on every agent that completes whole turns: the model
// server reports known token counts in each API's own fields, and what
// reaches a step's `usage` is what the agent passes on of them, per agent
// as measured (claude-agent-acp 0.101.0, codex-acp 2.6.0, gemini 0.61.0,
// opencode 1.18.33, qwen 0.24.4):
//
//   - claude passes the counts on in the prompt response, per turn (it
//     counts each prompt from zero), and its cost in usage_update, per
//     session (so a continued step's cost is its own by subtraction);
//   - codex passes the counts on in the prompt response (input without the
//     cached reads, cache writes 0: the Responses API has no such count;
//     codex-acp 0.16.0 sent none), and usage_update with the tokens its
//     context holds (the last response's total), no cost;
//   - opencode passes the counts on in the prompt response (no cache
//     writes: Chat Completions has none) and a cost of 0 USD (the scripted
//     model has no price) in usage_update, whose `used` is the input with
//     the cached reads;
//   - gemini sends its counts only under the prompt response's _meta
//     (which ACP reserves and acpflow does not read): all unknown;
//   - qwen sends its counts only under the _meta of an empty
//     agent_message_chunk at the turn's end: all unknown.

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
			case "codex", "opencode":
				// The server's counts for this step's turn: input without
				// the cached reads; codex says 0 cache writes, opencode
				// none. total = input + cache read + output.
				k := int64(turns[id])
				want := map[string]int64{"input": 1200 * k, "output": 34 * k, "cache read": 5 * k, "total": 1239 * k}
				if u == nil || u.InputTokens == nil || u.OutputTokens == nil || u.CachedReadTokens == nil || u.TotalTokens == nil || u.ContextTokens == nil {
					t.Fatalf("%s: usage %s, want the token counts and context_tokens", id, b)
				}
				got := map[string]int64{"input": *u.InputTokens, "output": *u.OutputTokens, "cache read": *u.CachedReadTokens, "total": *u.TotalTokens}
				for k, v := range want {
					if got[k] != v {
						t.Errorf("%s: %s tokens %d, want %d (the model server's, for this step's turn alone)", id, k, got[k], v)
					}
				}
				// usage_update's `used`: codex's is the last response's
				// total, opencode's its input with the cached reads.
				wantContext := map[string]int64{"codex": 1239, "opencode": 1205}[ta.name]
				if *u.ContextTokens != wantContext {
					t.Errorf("%s: context_tokens %d, want %d, what %s reports", id, *u.ContextTokens, wantContext, ta.name)
				}
				switch ta.name {
				case "codex":
					if u.CachedWriteTokens == nil || *u.CachedWriteTokens != 0 || u.Cost != nil {
						t.Errorf("%s: usage %s, want cache writes 0 and no cost, as codex sends", id, b)
					}
				case "opencode":
					if u.CachedWriteTokens != nil || u.Cost == nil || u.Cost.Amount != 0 || u.Cost.Currency != "USD" {
						t.Errorf("%s: usage %s, want no cache writes and a cost of 0 USD, as opencode sends", id, b)
					}
				}
			case "gemini", "qwen":
				if u != nil {
					t.Errorf("%s: usage %s, want none: %s reports its counts only under _meta", id, b, ta.name)
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
		case "codex", "opencode":
			if detail.Usage["total_tokens"] != float64(1239*(turns["plan"]+turns["next"])) || detail.Usage["unreported_steps"] != nil {
				t.Errorf("the run's usage %v, want the steps' sum", detail.Usage)
			}
			// codex: "usage: 1,239 tokens (in 1,200, out 34, thought 0,
			// cache read 5, cache write 0)"; opencode: "usage: 1,239
			// tokens, 0.00 USD (in 1,200, out 34, cache read 5)".
			if strings.Count(text, "  usage: 1,239 tokens") != 2 {
				t.Errorf("show does not give %s's counts:\n%s", ta.name, text)
			}
		case "gemini", "qwen":
			if detail.Usage != nil {
				t.Errorf("the run's usage %v, want none", detail.Usage)
			}
			if strings.Count(text, "  usage: unknown\n") != 2 || !strings.Contains(text, "  usage:     unknown\n") {
				t.Errorf("show does not say unknown for %s:\n%s", ta.name, text)
			}
		}
	})
}
