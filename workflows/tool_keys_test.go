package workflows_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/workflows"
)

const toolKeys = `
name: t
inputs:
  token: {type: string, default: t0}
  file: {type: string, default: README.md}
agents:
  claude:
    preset: claude
    mcp-servers:
      - name: github
        command: github-mcp-server
        args: [stdio, "--toolsets=${{ inputs.file }}"]
        env: {GITHUB_TOKEN: "${{ env.GITHUB_TOKEN }}", DEBUG: 1}
      - {name: docs, type: http, url: "https://docs.example/mcp", headers: {Authorization: "Bearer ${{ inputs.token }}"}}
      - {name: events, type: sse, url: "http://localhost:8080/sse"}
steps:
  - id: a
    uses: acp-subagent
    with:
      agent: claude
      prompt: hi
      mcp-servers:
        - {name: docs, type: http, url: "https://other.example/mcp"}
        - {name: fs, command: "${{ inputs.file }}-server", stdio-unused-key-guard: x}
      attach: [README.md, "${{ inputs.file }}"]
`

func TestParseReadsMCPServersAndAttach(t *testing.T) {
	src := strings.Replace(toolKeys, ", stdio-unused-key-guard: x", "", 1)
	wf, err := workflows.Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []steps.MCPServer{
		{Name: "github", Type: "stdio", Command: "github-mcp-server", Args: []string{"stdio", "--toolsets=${{ inputs.file }}"},
			Env: []steps.MCPVar{{Name: "DEBUG", Value: "1"}, {Name: "GITHUB_TOKEN", Value: "${{ env.GITHUB_TOKEN }}"}}},
		{Name: "docs", Type: "http", URL: "https://docs.example/mcp", Headers: []steps.MCPVar{{Name: "Authorization", Value: "Bearer ${{ inputs.token }}"}}},
		{Name: "events", Type: "sse", URL: "http://localhost:8080/sse"},
	}
	if got := wf.Agents["claude"].MCPServers; !reflect.DeepEqual(got, want) {
		t.Errorf("agent's servers =\n%+v\nwant\n%+v (templates raw, env in name order, stdio by default)", got, want)
	}
	with := wf.Steps[0].With
	servers, ok := with["mcp-servers"].([]any)
	if !ok || len(servers) != 2 {
		t.Fatalf("with.mcp-servers = %#v, want a list of two", with["mcp-servers"])
	}
	if fs, _ := servers[1].(map[string]any); fs == nil || reflect.TypeOf(fs["command"]) != reflect.TypeOf(&engine.Template{}) {
		t.Errorf("with.mcp-servers[1] = %#v, want its command compiled as a template", servers[1])
	}
	if attach, _ := with["attach"].([]any); len(attach) != 2 {
		t.Errorf("with.attach = %#v, want a list of two", with["attach"])
	}
}

// TestTheSchemaAcceptsTheToolKeys: what the loader accepts, the editor's
// schema accepts too.
func TestTheSchemaAcceptsTheToolKeys(t *testing.T) {
	s := compileSchema(t)
	file := filepath.Join(t.TempDir(), "t.yaml")
	if err := os.WriteFile(file, []byte(strings.Replace(toolKeys, ", stdio-unused-key-guard: x", "", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(yamlAsJSON(t, file)); err != nil {
		t.Error(err)
	}
}

// TestToolKeysThatAreRefused: each mistake is reported at the value at
// fault (the caret's line and column), and no message carries a value of
// env or headers, or the url and command that may embed one.
func TestToolKeysThatAreRefused(t *testing.T) {
	const secret = "s3cr3t-value"
	for _, tc := range []struct {
		name  string
		agent string // the agent's mcp-servers value
		with  string // extra with: lines (flow style, one line)
		want  string
		at    string // the text the caret must be on (its first occurrence in the agent's or the step's lines)
	}{
		{name: "an agent's mcp-servers as a mapping", agent: "{github: {command: x}}", want: "mcp-servers: want a list of servers", at: "{github"},
		{name: "an entry that is a string", agent: "[github]", want: "mcp-servers[0]: want a mapping", at: "github"},
		{name: "an entry without a name", agent: "[{command: x}, {command: y, env: {T: " + secret + "}}]", want: "mcp-servers[0]: missing name", at: "{command: x}"},
		{name: "a name that is not a word", agent: "[{name: 'my server', command: x}]", want: `name "my server": use letters, digits`, at: "'my server'"},
		{name: "a name with a template", agent: "[{name: '${{ inputs.token }}', command: x}]", want: "name: ${{ }} is not rendered here", at: "'${{"},
		{name: "a duplicate name", agent: "[{name: gh, command: x}, {name: gh, command: y}]", want: `mcp-servers[1] (gh): duplicate name "gh": mcp-servers[0] has it already`, at: "gh, command: y"},
		{name: "a misspelt key", agent: "[{name: gh, type: http, url: 'https://h', hedaers: {A: " + secret + "}}]", want: `mcp-servers[0] (gh): unknown key "hedaers"; did you mean "headers"?`, at: "{A:"},
		{name: "a stdio server without a command", agent: "[{name: gh, args: [a]}]", want: "mcp-servers[0] (gh): missing command", at: "{name: gh"},
		{name: "an http server without a url", agent: "[{name: gh, type: http, headers: {A: " + secret + "}}]", want: "mcp-servers[0] (gh): missing url: an http server needs", at: "{name: gh"},
		{name: "an sse server without a url", agent: "[{name: gh, type: sse}]", want: "missing url: an sse server needs", at: "{name: gh"},
		{name: "an unknown type", agent: "[{name: gh, type: grpc, url: 'https://h'}]", want: `unknown type "grpc" (known: stdio, http, sse)`, at: "grpc"},
		{name: "a url on a stdio server", agent: "[{name: gh, command: x, url: 'https://h/?t=" + secret + "'}]", want: "url is not a key of a stdio server", at: "'https"},
		{name: "headers on a stdio server", agent: "[{name: gh, command: x, headers: {A: " + secret + "}}]", want: "headers is not a key of a stdio server", at: "{A:"},
		{name: "a command on an http server", agent: "[{name: gh, type: http, url: 'https://h', command: " + secret + "}]", want: "command is not a key of an http server (it takes url and headers)", at: secret},
		{name: "a url that is not http", agent: "[{name: gh, type: http, url: 'ftp://h/" + secret + "'}]", want: "url: want an http:// or https:// URL", at: "'ftp"},
		{name: "a url without a host", agent: "[{name: gh, type: sse, url: 'https:///" + secret + "'}]", want: "url: the URL has no host", at: "'https"},
		{name: "an empty command", agent: "[{name: gh, command: ''}]", want: "command is empty", at: "''"},
		{name: "args that are not a list", agent: "[{name: gh, command: x, args: " + secret + "}]", want: "args: want a list of strings, got a string", at: secret},
		{name: "an arg that is a mapping", agent: "[{name: gh, command: x, args: [a, {b: " + secret + "}]}]", want: "args.1: want a string, got a mapping", at: "{b:"},
		{name: "env that is a list", agent: "[{name: gh, command: x, env: [" + secret + "]}]", want: "env: want a mapping of variable names to values, got a list", at: "[" + secret},
		{name: "an env value that is a list", agent: "[{name: gh, command: x, env: {T: [" + secret + "]}}]", want: "env.T: want a string, got a list", at: "[" + secret},
		{name: "an env value that is null", agent: "[{name: gh, command: x, env: {T: }}]", want: "env.T: want a string, got nothing", at: " }}]"},
		{name: "a variable name with =", agent: "[{name: gh, command: x, env: {'A=B': " + secret + "}}]", want: `env: "A=B" is not a variable name`, at: "{'A=B'"},
		{name: "a header name with a space", agent: "[{name: gh, type: http, url: 'https://h', headers: {'X Token': " + secret + "}}]", want: `headers: "X Token" is not a header name`, at: "{'X Token'"},
		{name: "a header value that does not compile", agent: "[{name: gh, type: http, url: 'https://h', headers: {A: '${{ 1 + }}'}}]", want: "does not compile", at: "+ }}'"},
		{name: "a command with an unknown input", agent: "[{name: gh, command: '${{ inputs.tokn }}'}]", want: `unknown input "tokn"`, at: "inputs.tokn"},

		{name: "a step's mcp-servers as a string", with: "mcp-servers: github", want: "with.mcp-servers: want a list of servers", at: "github"},
		{name: "a step's server without a url", with: "mcp-servers: [{name: gh, type: http, headers: {A: " + secret + "}}]", want: "with.mcp-servers[0] (gh): missing url", at: "{name: gh"},
		{name: "a step's duplicate server", with: "mcp-servers: [{name: gh, command: a}, {name: gh, command: b}]", want: "with.mcp-servers[1] (gh): duplicate name", at: "gh, command: b"},
		{name: "a step's misspelt server key", with: "mcp-servers: [{name: gh, comand: a}]", want: `unknown key "comand"; did you mean "command"?`, at: "a}]"},
		{name: "a step's server with an env value that is a mapping", with: "mcp-servers: [{name: gh, command: a, env: {T: {x: " + secret + "}}}]", want: "with.mcp-servers[0] (gh): env.T: want a string, got a mapping", at: "{x:"},
		{name: "a step's header with an unknown input", with: "mcp-servers: [{name: gh, type: http, url: 'https://h', headers: {A: '${{ inputs.tokn }}'}}]", want: `unknown input "tokn"`, at: "inputs.tokn"},
		{name: "a step's attach as a string", with: "attach: README.md", want: "with.attach: want a list of paths in the workspace", at: "README.md"},
		{name: "a step's attach entry that is a number", with: "attach: [a.md, 42]", want: "with.attach[1]: want a path (a string), got 42", at: "42"},
		{name: "a step's empty attach path", with: "attach: [a.md, '']", want: "with.attach[1]: the path is empty", at: "'']"},
		{name: "a step's attach of 101 files", with: "attach: [" + strings.Repeat("a.md, ", 100) + "a.md]", want: "with.attach: at most 100 files, got 101", at: "[a.md"},
		{name: "a step's attach with an unknown input", with: "attach: ['${{ inputs.fle }}']", want: `unknown input "fle"`, at: "inputs.fle"},
		{name: "a misspelt attach", with: "atach: [a.md]", want: `unknown key "atach" for acp-subagent; did you mean "attach"?`, at: "atach"},
	} {
		t.Run(tc.name+" is refused", func(t *testing.T) {
			agent := "    builtin: demo\n"
			if tc.agent != "" {
				agent += "    mcp-servers: " + tc.agent + "\n"
			}
			with := ""
			if tc.with != "" {
				with = "      " + tc.with + "\n"
			}
			head := "name: t\ninputs:\n  token: {type: string, default: t0}\n  file: {type: string, default: a.md}\nagents:\n  demo:\n"
			tail := "steps:\n  - id: a\n    uses: acp-subagent\n    with:\n      agent: demo\n      prompt: hi\n"
			src := head + agent + tail + with
			_, err := workflows.Parse("t.yaml", []byte(src))
			if err == nil {
				t.Fatalf("accepted:\n%s", src)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			// The message, not the source line the loader quotes under it:
			// that is the user's own file, shown to the user at validate
			// time, before anything runs or is recorded.
			if msg, _, _ := strings.Cut(err.Error(), "\n"); strings.Contains(msg, secret) {
				t.Errorf("the message shows a value of the file (%s):\n%s", secret, err)
			}
			// The caret: the first occurrence of tc.at in the lines that
			// were added for the case.
			start := len(head)
			if tc.agent == "" {
				start = len(head + agent + tail)
			}
			i := strings.Index(src[start:], tc.at)
			if i < 0 {
				t.Fatalf("bad case: %q is not in the source", tc.at)
			}
			i += start
			line := strings.Count(src[:i], "\n") + 1
			col := i - strings.LastIndex(src[:i], "\n")
			if at := fmt.Sprintf("t.yaml:%d:%d:", line, col); !strings.HasPrefix(err.Error(), at) {
				t.Errorf("error is not at %s (on %q):\n%s", at, tc.at, err)
			}
		})
	}
}
