package acpsubagent

import (
	"fmt"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acpflow/acpflow/steps"
)

// checkToolKeys checks the shapes of with.mcp-servers and with.attach at
// validate time, so that a missing url or a misspelt key fails `validate`
// with its position rather than a run. What only rendering can tell (a
// template that gives an empty command, a path that does not exist) is
// checked when the step runs.
func checkToolKeys(with map[string]any) error {
	if v, ok := with["mcp-servers"]; ok {
		if _, err := steps.MCPServersOf(v, withPath("mcp-servers")); err != nil {
			return err
		}
	}
	return checkAttach(with)
}

// mcpServers resolves the agent's and the step's mcp-servers, rendered.
// The step's list is added to the agent's, and a step's server replaces
// the agent's of the same name in its place. The agent's strings are
// rendered with render (nil: as written); the step's come rendered in
// with. The list is never nil: session/new must send [] for none.
//
// # Notes
//
// The env and header values are the user's explicit values and may be
// credentials: no error here quotes one (or a command or url, which may
// embed one), only the server's name and the key.
func mcpServers(agent *steps.Agent, with map[string]any, render func(string) (string, error)) ([]acp.McpServer, error) {
	if render == nil {
		render = func(s string) (string, error) { return s, nil }
	}
	servers := make([]steps.MCPServer, 0, len(agent.MCPServers))
	for _, s := range agent.MCPServers {
		r, err := renderMCPServer(s, render, "agents."+agent.Name+".mcp-servers."+s.Name)
		if err != nil {
			return nil, err
		}
		servers = append(servers, r)
	}
	if v, ok := with["mcp-servers"]; ok && v != nil {
		own, err := steps.MCPServersOf(v, withPath("mcp-servers"))
		if err != nil {
			return nil, err
		}
		for _, s := range own {
			if err := checkRendered(s, "with.mcp-servers."+s.Name); err != nil {
				return nil, err
			}
			if i := indexOfServer(servers, s.Name); i >= 0 {
				servers[i] = s
			} else {
				servers = append(servers, s)
			}
		}
	}
	out := make([]acp.McpServer, 0, len(servers))
	for _, s := range servers {
		out = append(out, wireServer(s))
	}
	return out, nil
}

// renderMCPServer renders the strings of an agent's server (all but its
// name and type, which are written as they are) and checks the result.
func renderMCPServer(s steps.MCPServer, render func(string) (string, error), at string) (steps.MCPServer, error) {
	r := steps.MCPServer{Name: s.Name, Type: s.Type}
	var err error
	if r.Command, err = render(s.Command); err != nil {
		return r, fmt.Errorf("%s.command: %w", at, err)
	}
	if r.URL, err = render(s.URL); err != nil {
		return r, fmt.Errorf("%s.url: %w", at, err)
	}
	for i, a := range s.Args {
		v, err := render(a)
		if err != nil {
			return r, fmt.Errorf("%s.args[%d]: %w", at, i, err)
		}
		r.Args = append(r.Args, v)
	}
	for _, f := range []struct {
		key  string
		from []steps.MCPVar
		to   *[]steps.MCPVar
	}{{"env", s.Env, &r.Env}, {"headers", s.Headers, &r.Headers}} {
		for _, kv := range f.from {
			v, err := render(kv.Value)
			if err != nil {
				return r, fmt.Errorf("%s.%s.%s: %w", at, f.key, kv.Name, err)
			}
			*f.to = append(*f.to, steps.MCPVar{Name: kv.Name, Value: v})
		}
	}
	return r, checkRendered(r, at)
}

// checkRendered checks what rendering may have broken: a command or url
// that came out empty, a url that is not one.
func checkRendered(s steps.MCPServer, at string) error {
	switch s.Type {
	case steps.MCPStdio:
		if s.Command == "" {
			return fmt.Errorf("%s.command: the command is empty once rendered", at)
		}
	case steps.MCPHTTP, steps.MCPSSE:
		if err := steps.CheckMCPURL(s.URL); err != nil {
			return fmt.Errorf("%s.url: %w", at, err)
		}
	}
	return nil
}

func indexOfServer(servers []steps.MCPServer, name string) int {
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
	case steps.MCPHTTP:
		return acp.McpServer{Http: &acp.McpServerHttpInline{Name: s.Name, Type: "http", Url: s.URL, Headers: headers(s.Headers)}}
	case steps.MCPSSE:
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

// mcpSecrets are the values of the servers' env and headers, which a
// transcript must not hold: session/new carries them.
func mcpSecrets(servers []acp.McpServer) []string {
	var out []string
	for _, s := range servers {
		switch {
		case s.Stdio != nil:
			for _, e := range s.Stdio.Env {
				out = append(out, e.Value)
			}
		case s.Http != nil:
			for _, h := range s.Http.Headers {
				out = append(out, h.Value)
			}
		case s.Sse != nil:
			for _, h := range s.Sse.Headers {
				out = append(out, h.Value)
			}
		}
	}
	return out
}
