package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/policies/wasmpolicy"
	"github.com/acpflow/acpflow/wasm"
)

// permissionRequest is a permission request as claude-agent-acp asks it,
// in the JSON of docs/policies.md#permission-policies.
var permissionRequest = []byte(`{"kind": "permission",
 "workflow": "review", "run_id": "20261130T090000-aaaa0001", "step": "plan", "agent": "claude",
 "workspace": "/home/u/src/app", "cwd": "/home/u/src/app",
 "tool": {"id": "toolu_01ABCDEF", "kind": "execute", "title": "Run make test && rm -rf build", "status": "pending",
          "raw_input": {"command": "make test && rm -rf build"},
          "locations": [{"path": "/home/u/src/app/build", "line": 0, "in_workspace": true}]},
 "options": [{"id": "allow", "name": "Allow", "kind": "allow_once"},
             {"id": "reject", "name": "Reject", "kind": "reject_once"}],
 "config": {}}`)

// policyDecisionCosts measures one permission decision, JSON decode
// included, per policy form, with testing.Benchmark in this process; and
// the load of the Go example module by a second process with a warm cache.
func policyDecisionCosts(b *bench) *section {
	ctx := context.Background()
	rules, err := policies.ParsePermission(map[string]any{
		"rules": []any{
			map[string]any{"if": `tool.kind in ["read", "search", "think"]`, "then": "allow"},
			map[string]any{"if": `tool.kind == "execute" && tool.command matches "^(rm|sudo|curl) "`, "then": "reject"},
			map[string]any{"if": `tool.kind == "edit" && all(tool.locations, .in_workspace)`, "then": "allow"},
			map[string]any{"if": `any(commands(tool.command), # startsWith "rm ")`, "then": "reject", "reason": "rm"},
		},
	}, "")
	check(err)
	host, err := wasm.NewHost(ctx)
	check(err)
	defer host.Close(ctx)
	module := func(name string) policies.Permission {
		m, err := host.Load(ctx, examplePath(name), wasm.Limits{})
		check(err)
		return wasmpolicy.NewPermission(m, name, nil)
	}
	forms := []struct {
		name   string
		policy policies.Permission
		target time.Duration // 0: none
	}{
		{"shorthand (`reject`)", policies.DefaultPermission(), 0},
		{"expr rules (4 rules, the last matches)", rules, 5 * time.Microsecond},
		{"WASM command module, C", module("c.wasm"), 300 * time.Microsecond},
		{"WASM command module, AssemblyScript", module("assemblyscript.wasm"), 300 * time.Microsecond},
		{"WASM reactor (fast path), C", module("c-reactor.wasm"), 10 * time.Microsecond},
	}
	sec := &section{title: "Policy decisions"}
	w := &sec.body
	fmt.Fprintf(w, "One permission decision from the request's JSON to the selected option (decode, policy,\n")
	fmt.Fprintf(w, "option selection), `testing.Benchmark` in one process; modules from wasm/examples.\n\n")
	t := newTable("policy", "per decision", "allocs")
	for _, f := range forms {
		r := testing.Benchmark(func(tb *testing.B) {
			tb.ReportAllocs()
			for i := 0; i < tb.N; i++ {
				req, err := policies.DecodePermissionRequest(permissionRequest)
				if err != nil {
					tb.Fatal(err)
				}
				if rec := policies.Answer(ctx, f.policy, policies.SourceWorkflow, req); rec.Decision != policies.Reject {
					tb.Fatalf("%s decided %s (%s)", f.name, rec.Decision, rec.Reason)
				}
			}
		})
		per := time.Duration(r.NsPerOp())
		t.row(f.name, per.String(), fmt.Sprint(r.AllocsPerOp()))
		if f.target > 0 {
			sec.target(fmt.Sprintf("a decision via %s ≤ %s", f.name, f.target), per.String(), per <= f.target)
		}
	}
	t.write(w)

	// The Go module: compiled once into the cache by a first process, then
	// loaded (and called once) by a second one.
	wf := b.workflow("go-policy.yaml", "permission: {wasm: %s}\n", examplePath("go.wasm"))
	req := filepath.Join(b.dir, "request.json")
	check(os.WriteFile(req, permissionRequest, 0o644))
	eval := command{argv: []string{b.acpflow, "policy", "eval", wf, "--request", req}, dir: b.dir}
	first := eval.mustMeasure()
	var warm []sample
	for i := 0; i < 5; i++ {
		warm = append(warm, eval.mustMeasure())
	}
	second := time.Duration(median(warm, wallOf))
	fmt.Fprintf(w, "\nThe Go example (3.3 MB) through `acpflow policy eval` (a whole process: start, load, one call):\n")
	fmt.Fprintf(w, "first process %s (compiles, fills the cache), later processes %s (median of 5).\n", first.wall.Round(time.Millisecond), second.Round(time.Millisecond))
	sec.target("the Go example loaded by a second process, warm cache ≤ 150 ms", second.Round(time.Millisecond).String(), second <= 150*time.Millisecond)
	return sec
}

// examplePath finds a built example module: the freshly built one if
// wasm/examples/build.sh ran, else the prebuilt one.
func examplePath(name string) string {
	for _, dir := range []string{"wasm/examples/out", "wasm/examples/prebuilt"} {
		p, _ := filepath.Abs(filepath.Join(dir, name))
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	check(fmt.Errorf("no %s in wasm/examples/out or wasm/examples/prebuilt", name))
	return ""
}
