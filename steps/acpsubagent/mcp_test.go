package acpsubagent

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// render is a step's Render for the tests: ${{ token }} is the one
// expression it knows, and ${{ fail }} fails the way a template can.
func render(s string) (string, error) {
	if strings.Contains(s, "${{ fail }}") {
		return "", errors.New("in ${{ fail }}: unknown name fail")
	}
	return strings.ReplaceAll(s, "${{ token }}", "tok-rendered"), nil
}

// stepServers reads a step's with.mcp-servers as Prepare does.
func stepServers(t *testing.T, list []any) []steps.MCPServer {
	t.Helper()
	own, err := acpagent.MCPServersOf(list, []string{"with", "mcp-servers"})
	if err != nil {
		t.Fatal(err)
	}
	return own
}

func TestMCPServersAreTheAgentsWithTheStepsLaidOver(t *testing.T) {
	agent := steps.NewAgent("claude")
	agent.MCPServers = []steps.MCPServer{
		{Name: "github", Type: "stdio", Command: "github-mcp", Args: []string{"stdio"}, Env: []steps.MCPVar{{Name: "GITHUB_TOKEN", Value: "${{ token }}"}}},
		{Name: "docs", Type: "http", URL: "https://docs.example/mcp", Headers: []steps.MCPVar{{Name: "Authorization", Value: "Bearer ${{ token }}"}}},
		{Name: "bare", Type: "stdio", Command: "bare-mcp"},
	}
	// with: as the file wrote it.
	own := stepServers(t, []any{
		map[string]any{"name": "docs", "type": "sse", "url": "http://localhost:9/sse"},
		map[string]any{"name": "fs", "command": "fs-mcp", "args": []any{"--root", 3}, "env": map[string]any{"B": true, "A": "x"}},
	})
	servers, err := mcpServers(agent, "s", own, render)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(wireServers(servers))
	if err != nil {
		t.Fatal(err)
	}
	// The agent's order, the step's docs in the agent's place, the step's
	// new server last; every list present (ACP requires them), never null.
	want := `[` +
		`{"args":["stdio"],"command":"github-mcp","env":[{"name":"GITHUB_TOKEN","value":"tok-rendered"}],"name":"github"},` +
		`{"headers":[],"name":"docs","type":"sse","url":"http://localhost:9/sse"},` +
		`{"args":[],"command":"bare-mcp","env":[],"name":"bare"},` +
		`{"args":["--root","3"],"command":"fs-mcp","env":[{"name":"A","value":"x"},{"name":"B","value":"true"}],"name":"fs"}]`
	if string(got) != want {
		t.Errorf("session/new's mcpServers =\n%s\nwant\n%s", got, want)
	}
	if agent.MCPServers[0].Env[0].Value != "${{ token }}" {
		t.Error("rendering changed the agent, which every step shares")
	}
}

func TestMCPServersAreAnEmptyListWhenThereAreNone(t *testing.T) {
	servers, err := mcpServers(steps.NewAgent("a"), "s", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(acp.NewSessionRequest{Cwd: "/ws", McpServers: wireServers(servers)})
	if !strings.Contains(string(b), `"mcpServers":[]`) {
		t.Errorf("session/new = %s, want mcpServers: [] (ACP requires the list; null is refused)", b)
	}
}

// TestMCPServerErrorsNameTheServerAndKeyNeverTheValue: what fails once
// rendered is reported with the server's name and the key; the values
// (credentials, or a url or command that embeds one) are not in it.
func TestMCPServerErrorsNameTheServerAndKeyNeverTheValue(t *testing.T) {
	const secret = "tok-rendered"
	for _, tc := range []struct {
		name  string
		agent []steps.MCPServer
		with  []any
		want  string
	}{
		{"a header that does not render", []steps.MCPServer{{Name: "docs", Type: "http", URL: "https://h", Headers: []steps.MCPVar{{Name: "Authorization", Value: "${{ token }} ${{ fail }}"}}}}, nil,
			"agents.claude.mcp-servers.docs.headers.Authorization: in ${{ fail }}"},
		{"an env value that does not render", []steps.MCPServer{{Name: "gh", Type: "stdio", Command: "x", Env: []steps.MCPVar{{Name: "T", Value: "${{ fail }}"}}}}, nil,
			"agents.claude.mcp-servers.gh.env.T: in ${{ fail }}"},
		{"a command that renders empty", []steps.MCPServer{{Name: "gh", Type: "stdio", Command: "${{ empty }}"}}, nil,
			"agents.claude.mcp-servers.gh.command: the command is empty once rendered"},
		{"an agent's url that renders to no URL", []steps.MCPServer{{Name: "docs", Type: "http", URL: "ftp://${{ token }}"}}, nil,
			"agents.claude.mcp-servers.docs.url: want an http:// or https:// URL"},
		{"a step's url that renders to no URL", nil, []any{map[string]any{"name": "docs", "type": "http", "url": "${{ token }}", "headers": map[string]any{"A": secret}}},
			"with.mcp-servers.docs.url: want an http:// or https:// URL"},
		{"a step's value that does not render", nil, []any{map[string]any{"name": "docs", "type": "http", "url": "https://h", "headers": map[string]any{"A": "${{ fail }}"}}},
			"with.mcp-servers.docs.headers.A: in ${{ fail }}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			agent := steps.NewAgent("claude")
			agent.MCPServers = tc.agent
			var own []steps.MCPServer
			if tc.with != nil {
				own = stepServers(t, tc.with)
			}
			r := func(s string) (string, error) {
				if strings.Contains(s, "${{ empty }}") {
					return "", nil
				}
				return render(s)
			}
			_, err := mcpServers(agent, "s", own, r)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q carries a value", err)
			}
		})
	}
}

func TestCheckMCPTakesStdioAlwaysAndHTTPAndSSEWhereAdvertised(t *testing.T) {
	stdio := acp.McpServer{Stdio: &acp.McpServerStdio{Name: "gh", Command: "x", Args: []string{}, Env: []acp.EnvVariable{}}}
	httpServer := acp.McpServer{Http: &acp.McpServerHttpInline{Name: "docs", Type: "http", Url: "https://h", Headers: []acp.HttpHeader{{Name: "A", Value: "secret-header"}}}}
	sse := acp.McpServer{Sse: &acp.McpServerSseInline{Name: "events", Type: "sse", Url: "https://h", Headers: []acp.HttpHeader{}}}
	for _, tc := range []struct {
		name    string
		servers []acp.McpServer
		caps    acp.McpCapabilities
		want    string // "" for no error
	}{
		{"no servers, no capabilities", nil, acp.McpCapabilities{}, ""},
		{"stdio on an agent that advertises nothing", []acp.McpServer{stdio}, acp.McpCapabilities{}, ""},
		{"http on an agent that advertises http", []acp.McpServer{stdio, httpServer}, acp.McpCapabilities{Http: true}, ""},
		{"sse and http on an agent that advertises both", []acp.McpServer{sse, httpServer}, acp.McpCapabilities{Http: true, Sse: true}, ""},
		{"http on an agent without http", []acp.McpServer{stdio, httpServer}, acp.McpCapabilities{Sse: true},
			`agent claude does not support MCP servers over http (its initialize answer has no agentCapabilities.mcpCapabilities.http), so mcp-servers "docs" cannot be given to it`},
		{"sse on an agent with http only", []acp.McpServer{sse}, acp.McpCapabilities{Http: true},
			`agent claude does not support MCP servers over sse (its initialize answer has no agentCapabilities.mcpCapabilities.sse), so mcp-servers "events"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkMCP("claude", tc.servers, tc.caps)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Error("accepted")
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("error %q does not say %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), "secret-header"):
				t.Errorf("error %q carries a header's value", err)
			}
			var unsupported *mcpUnsupportedError
			if err != nil && !errors.As(err, &unsupported) {
				t.Errorf("error is a %T, want a *mcpUnsupportedError for the caller to tell it apart", err)
			}
		})
	}
}

func TestPrepareChecksTheStepsToolKeys(t *testing.T) {
	k := &Kind{}
	agents := map[string]*steps.Agent{"a": steps.NewAgent("a")}
	for _, tc := range []struct {
		name string
		with map[string]any
		path string // the FieldError's path, joined by dots
		want string
	}{
		{"a server without a url", map[string]any{"mcp-servers": []any{map[string]any{"name": "d", "type": "http"}}}, "with.mcp-servers.0", "with.mcp-servers[0] (d): missing url"},
		{"a server's misspelt key", map[string]any{"mcp-servers": []any{map[string]any{"name": "d", "comand": "x"}}}, "with.mcp-servers.0.comand", `did you mean "command"?`},
		{"attach as a mapping", map[string]any{"attach": map[string]any{"a": "b"}}, "with.attach", "with.attach: want a list of paths"},
		{"an attach entry that is a list", map[string]any{"attach": []any{"a.md", []any{"b"}}}, "with.attach.1", "with.attach[1]: want a path (a string), got a list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			with := map[string]any{"agent": "a", "prompt": "p"}
			for k, v := range tc.with {
				with[k] = v
			}
			_, err := k.Prepare(steps.StepConfig{ID: "s", With: with, Agents: agents})
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
		})
	}
}
