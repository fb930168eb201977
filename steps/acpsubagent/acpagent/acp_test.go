package acpagent

import (
	"encoding/json"
	"os"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acpflow/acpflow/policies"
)

// acpRequests holds requests captured from real agents; the policies
// tests read them too, so they stay with that package.
const acpRequests = "../../../policies/testdata/acp-requests"

// TestFromACPFlattensEachAgentsCapturedRequest builds the policy input
// from the requests captured from claude, codex and gemini
// (policies/testdata/acp-requests, which the policies tests read too),
// decoded as the SDK decodes them.
func TestFromACPFlattensEachAgentsCapturedRequest(t *testing.T) {
	if _, err := os.Stat(acpRequests); err != nil {
		t.Fatalf("the captures are not where this test reads them: %v", err)
	}
	where := policies.Request{Workflow: "wf", RunID: "r1", Step: "s", Agent: "a", Workspace: "/ws", Cwd: "/ws"}
	for _, c := range []struct {
		file, kind, command string
		locations           []policies.ToolLocation
		options             []string // kinds, in the agent's order
	}{
		{"claude-execute", "execute", "echo hi > shell.txt", []policies.ToolLocation{}, []string{"allow_always", "allow_once", "reject_once"}},
		{"codex-execute", "execute", "rm -rf build", []policies.ToolLocation{}, []string{"allow_once", "allow_always", "reject_once"}},
		{"gemini-execute", "execute", "mkdir -p d && echo hi > d/shell.txt", []policies.ToolLocation{}, []string{"allow_always", "allow_once", "reject_once"}},
		{"claude-edit", "edit", "", []policies.ToolLocation{{Path: "/ws/written.txt", InWorkspace: true}}, []string{"allow_always", "allow_once", "reject_once"}},
		{"codex-edit", "edit", "", []policies.ToolLocation{{Path: "/ws/src/hello.txt", InWorkspace: true}}, []string{"allow_once", "reject_once"}},
	} {
		t.Run(c.file+" is flattened with its command, locations and options", func(t *testing.T) {
			b, err := os.ReadFile(acpRequests + "/" + c.file + ".json")
			if os.IsNotExist(err) {
				t.Skip("no capture")
			}
			var p acp.RequestPermissionRequest
			if err := json.Unmarshal(b, &p); err != nil {
				t.Fatal(err)
			}
			req := FromACP(where, p)
			if req.Kind != policies.KindPermission || req.RunID != "r1" || req.Cwd != "/ws" || req.Config == nil {
				t.Errorf("request = %+v", req.Request)
			}
			if req.Tool.ID != string(p.ToolCall.ToolCallId) || req.Tool.Kind != c.kind || req.Tool.Command != c.command || req.Tool.RawInput == nil {
				t.Errorf("tool = %+v", req.Tool)
			}
			if len(req.Tool.Locations) != len(c.locations) {
				t.Fatalf("locations = %+v, want %+v", req.Tool.Locations, c.locations)
			}
			for i, l := range req.Tool.Locations {
				if l != c.locations[i] {
					t.Errorf("location %d = %+v, want %+v", i, l, c.locations[i])
				}
			}
			var kinds []string
			for _, o := range req.Options {
				kinds = append(kinds, o.Kind)
			}
			if len(kinds) != len(c.options) {
				t.Fatalf("options = %v, want %v", kinds, c.options)
			}
			for i := range kinds {
				if kinds[i] != c.options[i] {
					t.Errorf("options = %v, want %v", kinds, c.options)
				}
			}
		})
	}
}
