package steps

import (
	"errors"
	"strings"
	"testing"
)

// TestAgentCheckChecksItsMCPServers: an agent built in code (not read from
// a file) is held to the rules the loader applies, with the same paths.
func TestAgentCheckChecksItsMCPServers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		servers []MCPServer
		path    string
		want    string
	}{
		{"a duplicate name", []MCPServer{{Name: "gh", Type: MCPStdio, Command: "a"}, {Name: "gh", Type: MCPStdio, Command: "b"}},
			"mcp-servers.1.name", `agent a: mcp-servers[1] (gh): duplicate name "gh": mcp-servers[0] has it already`},
		{"a stdio server without a command", []MCPServer{{Name: "gh", Type: MCPStdio}}, "mcp-servers.0", "agent a: mcp-servers[0] (gh): missing command"},
		{"an unknown type", []MCPServer{{Name: "gh", Type: "grpc", URL: "https://h"}}, "mcp-servers.0.type", `unknown type "grpc"`},
		{"a url with a token that is not http", []MCPServer{{Name: "gh", Type: MCPSSE, URL: "ws://h/?token=tok-123"}}, "mcp-servers.0.url", "url: want an http:// or https:// URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAgent("a")
			a.Builtin = "demo"
			a.MCPServers = tc.servers
			err := a.Check()
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a *FieldError", err)
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
	a := NewAgent("a")
	a.Builtin = "demo"
	a.MCPServers = []MCPServer{{Name: "gh", Type: MCPStdio, Command: "x"}, {Name: "docs", Type: MCPHTTP, URL: "${{ inputs.url }}"}}
	if err := a.Check(); err != nil {
		t.Errorf("a stdio server and an http one whose url is a template: %v", err)
	}
}
