package policies

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// benchRequest is a permission request as claude-agent-acp asks it, in the
// JSON of docs/policies.md#permission-policies.
var benchRequest = []byte(`{"kind": "permission",
 "workflow": "review", "run_id": "01J9Z3K4M5N6P7Q8R9S0T1V2W3", "step": "plan", "agent": "claude",
 "workspace": "/home/u/src/app", "cwd": "/home/u/src/app/sub",
 "tool": {"id": "toolu_01ABCDEF", "kind": "execute", "title": "Run make test && rm -rf build", "status": "pending",
          "raw_input": {"command": "make test && rm -rf build", "description": "Build and clean"},
          "command": "make test && rm -rf build",
          "locations": [{"path": "/home/u/src/app/build", "line": 0, "in_workspace": true},
                        {"path": "/home/u/src/app/Makefile", "line": 12, "in_workspace": true}]},
 "options": [{"id": "allow", "name": "Allow", "kind": "allow_once"},
             {"id": "allow_always", "name": "Always Allow", "kind": "allow_always"},
             {"id": "reject", "name": "Reject", "kind": "reject_once"}],
 "config": {}}`)

// benchPolicy is the rules example of docs/policies.md#permission-policies with the compound-command
// rule of docs/policies.md: four rules, the request above matching the last.
func benchPolicy(b *testing.B) *PermissionRules {
	b.Helper()
	p, err := ParsePermission(map[string]any{
		"rules": []any{
			map[string]any{"if": `tool.kind in ["read", "search", "think"]`, "then": "allow"},
			map[string]any{"if": `tool.kind == "execute" && tool.command matches "^(rm|sudo|curl) "`, "then": "reject", "reason": "destructive or networked command"},
			map[string]any{"if": `tool.kind == "edit" && all(tool.locations, .in_workspace)`, "then": "allow"},
			map[string]any{"if": `any(commands(tool.command), # startsWith "rm ")`, "then": "reject", "reason": "rm in a compound command"},
		},
		"default": "reject",
	}, "")
	if err != nil {
		b.Fatal(err)
	}
	return p.(*PermissionRules)
}

func BenchmarkPermissionRulesDecide(b *testing.B) {
	p := benchPolicy(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		req, err := DecodePermissionRequest(benchRequest)
		if err != nil {
			b.Fatal(err)
		}
		v, err := p.DecidePermission(ctx, req)
		if err != nil || v.Rule != "4" {
			b.Fatalf("verdict %+v, %v; want rule 4", v, err)
		}
	}
}

func BenchmarkPermissionRulesDecideWithoutDecode(b *testing.B) {
	p := benchPolicy(b)
	ctx := context.Background()
	var req PermissionRequest
	if err := json.Unmarshal(benchRequest, &req); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		v, err := p.DecidePermission(ctx, &req)
		if err != nil || v.Rule != "4" {
			b.Fatalf("verdict %+v, %v; want rule 4", v, err)
		}
	}
}

// BenchmarkCommands is the cost of the commands helper on typical lines:
// a plain one (split without the parser) and ones the parser reads.
func BenchmarkCommands(b *testing.B) {
	for _, bc := range []struct{ name, line string }{
		{"plain", "make test && rm -rf build"},
		{"quoted", `git commit -m "fix: the build" && rm -rf build 2>&1 | tail -20`},
		{"shell-c", `bash -lc 'cd sub && npm test -- --watch=false'`},
		{"heredoc-4KiB", "cat > notes.md <<'EOF'\n" + strings.Repeat("a line of text in a file\n", 160) + "EOF\n"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Commands(bc.line); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPermissionRulesDecideParsed is BenchmarkPermissionRulesDecide
// with quotes and a redirection in the command line, which the fast path
// reads since it learnt them (6 µs through the parser).
func BenchmarkPermissionRulesDecideParsed(b *testing.B) {
	benchDecideLine(b, `make test 2>&1 && rm -rf \"build\"`)
}

// BenchmarkPermissionRulesDecideSubstitution is BenchmarkPermissionRulesDecide
// with a command substitution, which only the parser reads.
func BenchmarkPermissionRulesDecideSubstitution(b *testing.B) {
	benchDecideLine(b, `make test && echo $(rm -rf build)`)
}

func benchDecideLine(b *testing.B, line string) {
	p := benchPolicy(b)
	ctx := context.Background()
	data := bytes.ReplaceAll(benchRequest, []byte("make test && rm -rf build"), []byte(line))
	b.ReportAllocs()
	for b.Loop() {
		req, err := DecodePermissionRequest(data)
		if err != nil {
			b.Fatal(err)
		}
		v, err := p.DecidePermission(ctx, req)
		if err != nil || v.Rule != "4" {
			b.Fatalf("verdict %+v, %v; want rule 4", v, err)
		}
	}
}
