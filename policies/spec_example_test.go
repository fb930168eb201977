package policies_test

import (
	"context"
	"fmt"

	"github.com/acpflow/acpflow/policies"
)

func ExampleParsePermission() {
	// The decoded YAML of a `permission:` key.
	spec := map[string]any{
		"rules": []any{
			map[string]any{"if": `tool.kind in ["read", "search", "think"]`, "then": "allow"},
			map[string]any{"if": `any(commands(tool.command), # startsWith "rm ")`, "then": "reject", "reason": "rm"},
		},
	}
	p, err := policies.ParsePermission(spec, "/path/to/workflow/dir")
	if err != nil {
		panic(err)
	}
	req := &policies.PermissionRequest{
		Tool:    policies.Tool{ID: "call_1", Kind: "execute", Command: "make && rm -rf build"},
		Options: []policies.Option{{ID: "a1", Kind: "allow_once"}, {ID: "r1", Kind: "reject_once"}},
	}
	rec := policies.Answer(context.Background(), p, policies.SourceWorkflow, req)
	fmt.Println(rec.Decision, rec.OptionID, rec.Rule, rec.Reason)

	_, err = policies.ParsePermission(map[string]any{"rules": []any{
		map[string]any{"if": `tool.kidn == "read"`, "then": "alow"},
	}}, "")
	fmt.Println(err)
	// Output:
	// reject r1 2 rm
	// rules[0].if: tool has no field kidn; did you mean "kind"? (1:6)
	//  | tool.kidn == "read"
	//  | .....^
	// rules[0].then: want one of allow, allow_always, reject, reject_always, cancel, ask; got "alow"; did you mean "allow"?
}

func ExampleParseEnv() {
	spec := map[string]any{
		"inherit": "core",
		"rules": []any{
			map[string]any{"if": `name == "GH_TOKEN" && agent == "codex"`, "then": "keep"},
		},
	}
	e, err := policies.ParseEnv(spec, "")
	if err != nil {
		panic(err)
	}
	for _, agent := range []string{"codex", "claude"} {
		d, err := e.DecideEnv(context.Background(), &policies.EnvRequest{
			Request: policies.Request{Agent: agent},
			Ambient: map[string]string{"PATH": "/bin", "GH_TOKEN": "ghp_x", "EDITOR": "vi"},
		})
		if err != nil {
			panic(err)
		}
		fmt.Println(agent, policies.EnvList(d.Env))
	}
	// Output:
	// codex [GH_TOKEN=ghp_x PATH=/bin]
	// claude [PATH=/bin]
}
