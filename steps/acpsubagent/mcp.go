package acpsubagent

import (
	"context"
	"fmt"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
	"github.com/acpflow/acpflow/steps/redact"
)

// checkToolKeys checks the shapes of with.mcp-servers and with.attach at
// validate time, so that a missing url or a misspelt key fails `validate`
// with its position rather than a run. What only rendering can tell (a
// template that gives an empty command, a path that does not exist) is
// checked when the step runs.
func checkToolKeys(with map[string]any) error {
	if v, ok := with["mcp-servers"]; ok {
		if _, err := acpagent.MCPServersOf(v, steps.WithPath("mcp-servers")); err != nil {
			return err
		}
	}
	return checkAttach(with)
}

// mcpServer is one MCP server of a step, rendered: as session/new sends
// it, with what its record must not show.
type mcpServer struct {
	steps.MCPServer
	// setBy says whose list it came from ("step s's mcp-servers.docs"),
	// for an outer policy's refusal of one of its values.
	setBy string
	// url is the url in pieces, so that its templated parts can be hidden
	// wherever it is recorded; nil for a stdio server.
	url []redact.Piece
	// secrets are the values no record may hold: every env and header
	// value, and what each ${{ }} in its command, args and url produced.
	secrets []string
}

// mcpServers resolves the agent's and the step's mcp-servers (own, as the
// step's with: wrote them), rendered with render (nil: as written). The
// step's list is added to the agent's, and a step's server replaces the
// agent's of the same name in its place. The list is never nil:
// session/new must send [] for none.
//
// # Notes
//
// The env and header values are the user's explicit values and may be
// credentials: no error here quotes one (or a command or url, which may
// embed one), only the server's name and the key.
func mcpServers(agent *steps.Agent, step string, own []steps.MCPServer, render func(string) (string, error)) ([]mcpServer, error) {
	if render == nil {
		render = func(s string) (string, error) { return s, nil }
	}
	servers := make([]mcpServer, 0, len(agent.MCPServers)+len(own))
	for _, s := range agent.MCPServers {
		r, err := renderMCPServer(s, render, "agents."+agent.Name+".mcp-servers."+s.Name)
		if err != nil {
			return nil, err
		}
		r.setBy = "agent " + agent.Name + "'s mcp-servers." + s.Name
		servers = append(servers, r)
	}
	for _, s := range own {
		r, err := renderMCPServer(s, render, "with.mcp-servers."+s.Name)
		if err != nil {
			return nil, err
		}
		r.setBy = "step " + step + "'s mcp-servers." + s.Name
		if i := indexOfServer(servers, s.Name); i >= 0 {
			servers[i] = r
		} else {
			servers = append(servers, r)
		}
	}
	return servers, nil
}

// wireServers are servers as session/new sends them.
func wireServers(servers []mcpServer) []acp.McpServer {
	out := make([]acp.McpServer, 0, len(servers))
	for _, s := range servers {
		out = append(out, wireServer(s.MCPServer))
	}
	return out
}

// renderMCPServer renders the strings of a server (all but its name and
// type, which are written as they are) and checks the result.
func renderMCPServer(s steps.MCPServer, render func(string) (string, error), at string) (mcpServer, error) {
	r := mcpServer{MCPServer: steps.MCPServer{Name: s.Name, Type: s.Type}}
	one := func(raw, key string) (string, error) {
		pieces, err := redact.RenderPieces(raw, render)
		if err != nil {
			return "", fmt.Errorf("%s.%s: %w", at, key, err)
		}
		r.secrets = append(r.secrets, redact.Produced(pieces)...)
		if key == "url" && raw != "" {
			r.url = pieces
		}
		return redact.Joined(pieces), nil
	}
	var err error
	if r.Command, err = one(s.Command, "command"); err != nil {
		return r, err
	}
	if r.URL, err = one(s.URL, "url"); err != nil {
		return r, err
	}
	for i, a := range s.Args {
		v, err := one(a, fmt.Sprintf("args[%d]", i))
		if err != nil {
			return r, err
		}
		r.Args = append(r.Args, v)
	}
	for _, f := range []struct {
		key  string
		from []steps.MCPVar
		to   *[]steps.MCPVar
	}{{"env", s.Env, &r.Env}, {"headers", s.Headers, &r.Headers}} {
		for _, kv := range f.from {
			v, err := one(kv.Value, f.key+"."+kv.Name)
			if err != nil {
				return r, err
			}
			*f.to = append(*f.to, steps.MCPVar{Name: kv.Name, Value: v})
			r.secrets = append(r.secrets, v)
		}
	}
	return r, checkRendered(r.MCPServer, at)
}

// checkRendered checks what rendering may have broken: a command or url
// that came out empty, a url that is not one.
func checkRendered(s steps.MCPServer, at string) error {
	switch s.Type {
	case acpagent.MCPStdio:
		if s.Command == "" {
			return fmt.Errorf("%s.command: the command is empty once rendered", at)
		}
	case acpagent.MCPHTTP, acpagent.MCPSSE:
		if err := acpagent.CheckMCPURL(s.URL); err != nil {
			return fmt.Errorf("%s.url: %w", at, err)
		}
	}
	return nil
}

func indexOfServer(servers []mcpServer, name string) int {
	for i, s := range servers {
		if s.Name == name {
			return i
		}
	}
	return -1
}

// wireServer is a server as session/new sends it. Lists are never nil:
// ACP requires args, env and headers, and the SDK writes a nil slice as
// null.
func wireServer(s steps.MCPServer) acp.McpServer {
	switch s.Type {
	case acpagent.MCPHTTP:
		return acp.McpServer{Http: &acp.McpServerHttpInline{Name: s.Name, Type: "http", Url: s.URL, Headers: headers(s.Headers)}}
	case acpagent.MCPSSE:
		return acp.McpServer{Sse: &acp.McpServerSseInline{Name: s.Name, Type: "sse", Url: s.URL, Headers: headers(s.Headers)}}
	}
	args := append([]string{}, s.Args...)
	env := make([]acp.EnvVariable, 0, len(s.Env))
	for _, kv := range s.Env {
		env = append(env, acp.EnvVariable{Name: kv.Name, Value: kv.Value})
	}
	return acp.McpServer{Stdio: &acp.McpServerStdio{Name: s.Name, Command: s.Command, Args: args, Env: env}}
}

func headers(vars []steps.MCPVar) []acp.HttpHeader {
	out := make([]acp.HttpHeader, 0, len(vars))
	for _, kv := range vars {
		out = append(out, acp.HttpHeader{Name: kv.Name, Value: kv.Value})
	}
	return out
}

// mcpUnsupportedError is a server the agent cannot take. The step fails
// with it as it is: it is the workflow's mistake, not a failed request.
type mcpUnsupportedError struct {
	agent, server, transport string
}

func (e *mcpUnsupportedError) Error() string {
	return fmt.Sprintf("agent %s does not support MCP servers over %s (its initialize answer has no agentCapabilities.mcpCapabilities.%s), so mcp-servers %q cannot be given to it; use a stdio server (command:) or an agent that supports %s",
		e.agent, e.transport, e.transport, e.server, e.transport)
}

// checkMCP checks servers against what the agent advertised in its
// initialize answer (agentCapabilities.mcpCapabilities): every agent takes
// stdio, as ACP requires; http and sse only when advertised. The error is
// a *mcpUnsupportedError naming the server and the missing capability.
func checkMCP(agent string, servers []acp.McpServer, caps acp.McpCapabilities) error {
	for _, s := range servers {
		switch {
		case s.Http != nil && !caps.Http:
			return &mcpUnsupportedError{agent, s.Http.Name, "http"}
		case s.Sse != nil && !caps.Sse:
			return &mcpUnsupportedError{agent, s.Sse.Name, "sse"}
		case s.Acp != nil && !caps.Acp:
			return &mcpUnsupportedError{agent, s.Acp.Name, "acp"}
		}
	}
	return nil
}

// vars are the values of a server that reach the agent's side named as
// variables, for the outer policy (policies.Outer.Admit): a stdio server's
// env, an http or sse server's headers; and where they were set.
func (s mcpServer) vars() (map[string]string, string) {
	list, key := s.Env, ".env"
	if s.Type != acpagent.MCPStdio {
		list, key = s.Headers, ".headers"
	}
	if len(list) == 0 {
		return nil, ""
	}
	m := make(map[string]string, len(list))
	for _, kv := range list {
		m[kv.Name] = kv.Value
	}
	return m, s.setBy + key
}

// admitMCP puts the values that servers hand to the agent's side, named
// as variables (each stdio server's env, each http or sse server's
// headers), to the outer policy, as the agent's own explicit env is: a
// value an outer file drops fails the step before anything is spawned or
// sent, naming the variable and the server, never the value. A server's
// command, args and url are not variables: like a prompt, the outer env
// policy does not judge them (docs/policies.md#the-outer-policy).
func (a *attempt) admitMCP(ctx context.Context, servers []mcpServer) error {
	if len(a.inv.Outer) == 0 {
		return nil
	}
	req := &policies.EnvRequest{
		Request: policies.Request{Kind: policies.KindEnv, Workflow: a.inv.Workflow, RunID: a.inv.RunID, Step: a.inv.StepID,
			Agent: a.agent.Name, Workspace: a.inv.Workspace, Cwd: a.cwd},
		Ambient: a.inv.Ambient,
	}
	for _, s := range servers {
		values, setBy := s.vars()
		if err := a.inv.Outer.Admit(ctx, req, values, setBy); err != nil {
			return err
		}
	}
	return nil
}
