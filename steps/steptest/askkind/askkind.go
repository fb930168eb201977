// Package askkind is a step kind for tests only: `uses: ask` puts the tool
// named by `with.tool` to the step's permission policy and answers the
// decision as its output. It is a whole kind in one folder, registered by
// Register from a test binary and by no shipped one: the check that a new
// step kind touches its own folder only (policies/formtest runs it).
package askkind

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
)

// Name is the kind's `uses:` value.
const Name = "ask"

// Register registers the kind with steps, once per test binary.
func Register() { steps.Register(kind{}) }

type kind struct{}

func (kind) Name() string       { return Name }
func (kind) Keys() []string     { return []string{"tool"} }
func (kind) Required() []string { return []string{"tool"} }

func (kind) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","additionalProperties":false,"required":["tool"],"properties":{"tool":{"type":"string","description":"The title of the tool call to ask about."}}}`)
}

// Prepare checks that tool is a string, placing the error on it.
func (kind) Prepare(cfg steps.StepConfig) (steps.Step, error) {
	if _, ok := cfg.With["tool"].(string); !ok {
		return nil, steps.FieldErrorf([]string{"with", "tool"}, "with.tool: want the title of a tool call, got %v", cfg.With["tool"])
	}
	return step{}, nil
}

type step struct{}

// Run asks the step's permission policy about the tool and answers its
// decision, failing the step when the policy fails.
func (step) Run(ctx context.Context, inv *steps.Invocation) steps.Result {
	title := fmt.Sprint(inv.With["tool"])
	req := &policies.PermissionRequest{Tool: policies.Tool{ID: "t1", Kind: "execute", Title: title}}
	req.Kind = policies.KindPermission
	v, err := inv.Permission.DecidePermission(ctx, req)
	if err != nil {
		return steps.Result{StopReason: steps.Error, Err: fmt.Errorf("step %s: the permission policy: %w", inv.StepID, err)}
	}
	out := string(v.Decision)
	return steps.Result{StopReason: steps.Completed, Output: out, Final: out}
}
