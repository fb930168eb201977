package agentverify

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// readTurn reads a check's result file and the --json events acpflow
// printed.
func readTurn(resultFile string, events []byte) (turnResult, error) {
	var t turnResult
	b, err := os.ReadFile(resultFile)
	if err != nil {
		return t, fmt.Errorf("no result")
	}
	var res struct {
		Steps map[string]struct {
			Status      string           `json:"status"`
			Error       string           `json:"error"`
			Permissions []map[string]any `json:"permissions"`
		} `json:"steps"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		return t, fmt.Errorf("result: %v", err)
	}
	step := res.Steps["s"]
	t.status, t.err = step.Status, step.Error
	for _, p := range step.Permissions {
		kind, _ := p["kind"].(string)
		if p["decision"] == "unasked" {
			what := strings.TrimSpace(kind + " " + fmt.Sprint(p["command"]))
			if s, _ := p["status"].(string); s != "" && s != "completed" {
				what += " (" + s + ")"
			}
			t.unasked = append(t.unasked, what)
			continue
		}
		t.requested = append(t.requested, kind)
	}
	for _, line := range strings.Split(string(events), "\n") {
		var e map[string]any
		if json.Unmarshal([]byte(line), &e) != nil || e["type"] != "step_update" {
			continue
		}
		t.event(e)
	}
	return t, nil
}

// agentInfo is what the initialized and session events said of the agent.
type agentInfo struct {
	name, version, startMode string
	widening                 []string
}

// event keeps what a step_update says about the agent.
func (t *turnResult) event(e map[string]any) {
	switch e["kind"] {
	case "mode_restored":
		what := fmt.Sprintf("%v -> %v", e["from"], e["to"])
		if o, _ := e["option"].(string); o != "" {
			what = o + ": " + what
		}
		t.switches = append(t.switches, what)
	case "teardown":
		if t.tier == "" {
			t.tier, _ = e["tier"].(string)
			ms, _ := e["duration_ms"].(float64)
			t.exitMS = int64(ms)
		}
	case "initialized":
		t.info.name, _ = e["agent_name"].(string)
		t.info.version, _ = e["agent_version"].(string)
	case "session":
		t.info.startMode, _ = e["start_mode"].(string)
		if list, ok := e["widening_options"].([]any); ok {
			for _, w := range list {
				t.info.widening = append(t.info.widening, fmt.Sprint(w))
			}
		}
	}
}
