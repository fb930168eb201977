package steps

// NewAgent returns an agent with the default timings, for a loader to
// fill in from the keys the file sets.
func NewAgent(name string) *Agent {
	return &Agent{Name: name, StartTimeout: DefaultStartTimeout, EOFGrace: DefaultEOFGrace, TermGrace: DefaultTermGrace}
}

// MCPServer is one entry of `mcp-servers:`, an agent's or a step's: an MCP
// server the agent is told about in session/new, to start (stdio) or reach
// (http, sse) itself. The ACP kind decodes and checks it
// (acpagent.MCPServersOf).
//
// # Notes
//
// Name and Type are written as they are (a ${{ }} in them is refused), so
// that a step's server that replaces an agent's, duplicates and transports
// are known at validate time. The other strings may be templates until the
// step renders them.
//
// Env and Headers are explicit values the user wrote in the file, passed as
// given, like an agent's `env:`. They hold credentials (an Authorization
// header, a token for the server's process), so no message, event or record
// of acpflow carries one: errors name the server and the key, never a
// value.
type MCPServer struct {
	Name    string
	Type    string // stdio, http or sse (acpagent.MCPStdio, MCPHTTP, MCPSSE)
	Command string // stdio
	Args    []string
	Env     []MCPVar
	URL     string // http, sse
	Headers []MCPVar
}

// MCPVar is one environment variable or header of an MCP server. ACP sends
// them as lists; acpflow keeps them in name order, so that the same file
// always sends the same request.
type MCPVar struct{ Name, Value string }
