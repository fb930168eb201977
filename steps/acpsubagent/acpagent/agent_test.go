package acpagent

import (
	"errors"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/steps"
)

// TestAgentCheckChecksItsMCPServers: an agent built in code (not read from
// a file) is held to the rules the loader applies, with the same paths.
func TestAgentCheckChecksItsMCPServers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		servers []steps.MCPServer
		path    string
		want    string
	}{
		{"a duplicate name", []steps.MCPServer{{Name: "gh", Type: MCPStdio, Command: "a"}, {Name: "gh", Type: MCPStdio, Command: "b"}},
			"mcp-servers.1.name", `agent a: mcp-servers[1] (gh): duplicate name "gh": mcp-servers[0] has it already`},
		{"a stdio server without a command", []steps.MCPServer{{Name: "gh", Type: MCPStdio}}, "mcp-servers.0", "agent a: mcp-servers[0] (gh): missing command"},
		{"an unknown type", []steps.MCPServer{{Name: "gh", Type: "grpc", URL: "https://h"}}, "mcp-servers.0.type", `unknown type "grpc"`},
		{"a url with a token that is not http", []steps.MCPServer{{Name: "gh", Type: MCPSSE, URL: "ws://h/?token=tok-123"}}, "mcp-servers.0.url", "url: want an http:// or https:// URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := steps.NewAgent("a")
			a.Builtin = "demo"
			a.MCPServers = tc.servers
			err := Check(a)
			var fe *steps.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a *steps.FieldError", err)
			}
			if got := strings.Join(fe.Path, "."); got != tc.path {
				t.Errorf("path %q, want %q", got, tc.path)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "tok-123") {
				t.Errorf("error %q shows the url", err)
			}
		})
	}
	a := steps.NewAgent("a")
	a.Builtin = "demo"
	a.MCPServers = []steps.MCPServer{{Name: "gh", Type: MCPStdio, Command: "x"}, {Name: "docs", Type: MCPHTTP, URL: "${{ inputs.url }}"}}
	if err := Check(a); err != nil {
		t.Errorf("a stdio server and an http one whose url is a template: %v", err)
	}
}
