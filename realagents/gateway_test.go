//go:build realagents

package realagents_test

import (
	"crypto/rand"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/acpflow/acpflow/internal/gateway"
	"github.com/acpflow/acpflow/realagents/modelserver"
)

// gatewayProvider is the API each turn agent speaks to its model.
var gatewayProvider = map[string]string{
	"claude": "anthropic", "codex": "openai", "opencode": "openai", "qwen": "openai", "gemini": "gemini",
}

// viaGateway points an agent at a model gateway, holding its placeholder.
type viaGateway struct {
	*gateway.Gateway
	placeholder string
}

func (v viaGateway) AgentKey() string { return v.placeholder }

// Each preset's real agent, given only a placeholder and the gateway's
// URL, completes a whole turn: the gateway forwards with the key, the
// agent's answer is the model's, the usage is the model server's, and the
// key appears nowhere the agent or acpflow wrote.
func TestRealAgentsCompleteATurnThroughTheGateway(t *testing.T) {
	forEachTurnAgent(t, func(t *testing.T, s *sandbox, ta *turnAgent) {
		sent := &modelserver.Usage{Input: 321, Output: 54, CacheRead: 7}
		srv, err := modelserver.Start(modelserver.Script{{Say: "Answered through the gateway.", Usage: sent}})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		canary := "sk-canary-" + rand.Text()
		var mu sync.Mutex
		var exchanges []gateway.Exchange
		placeholder := gateway.NewPlaceholder()
		g, err := gateway.Start(gateway.Config{Provider: gatewayProvider[ta.name], Upstream: srv.URL(), Key: canary,
			Placeholder: placeholder, OnExchange: func(x gateway.Exchange) {
				mu.Lock()
				exchanges = append(exchanges, x)
				mu.Unlock()
			}})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		res, _, r := s.runTurn(s.writeTurnWorkflow(ta, viaGateway{g, placeholder}, "Say hello.", "", ""))
		g.Close()
		if res.Status != "completed" && res.Status != "succeeded" || !strings.Contains(res.Output, "Answered through the gateway.") {
			t.Errorf("step %+v\nstderr:\n%s", res.stepResult, r.stderr)
		}
		turns := 0
		for _, x := range exchanges {
			t.Logf("%s %s %s: %d, attempts %d, metered %v %+v, first byte %s", x.Method, x.Path, x.Model, x.Status, x.Attempts, x.Metered, x.Usage, x.FirstByte)
			if x.Refusal != nil {
				t.Errorf("the gateway refused %s %s: %+v", x.Method, x.Path, x.Refusal)
			}
			if x.Metered && x.Usage.Input == int64(sent.Input) && x.Usage.Output == int64(sent.Output) && x.Usage.CacheRead == int64(sent.CacheRead) {
				turns++
			}
		}
		if turns == 0 {
			t.Errorf("no exchange metered the script's usage: %+v", exchanges)
		}
		for _, text := range []string{r.stdout, r.stderr} {
			if strings.Contains(text, canary) {
				t.Error("the key is in acpflow's output")
			}
		}
		filepath.WalkDir(s.dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if b, _ := os.ReadFile(path); strings.Contains(string(b), canary) {
					t.Errorf("the key is in %s", path)
				}
			}
			return nil
		})
	})
}
