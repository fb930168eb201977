package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/cli"
	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/internal/suggest"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/workflows"
)

func newPolicyCmd() *cobra.Command {
	cmd := group(&cobra.Command{Use: "policy", Short: "Work with permission and env policies",
		Example: `  acpflow policy eval workflows/examples/policies.yaml --request req.json
  acpflow policy test workflows/examples/policies.yaml --runs status=failed`})
	var request, step, policy string
	eval := &cobra.Command{
		Use:   "eval FILE --request REQ.json",
		Short: "Evaluate the permission or env policy of a workflow (or a bare policy file) against one request",
		Long: `Evaluate a policy against one request and print the answer as JSON.

FILE is a workflow (its step's policy with --step, else its own, else the
default) or a bare policy file: YAML with a top-level permission: and/or env:,
shaped as under policies:. The request's "kind" (permission or env) says which
policy answers. A policy that fails answers as it would in a run: closed.

The answer is decided within the outer policy, as in a run (--policy,
$ACPFLOW_POLICY, /etc/acpflow/policy.yaml, the user's file), and says which
layer decided: "layer" is "outer" (then "policy" is the outer file) or
"workflow".`,
		Example: `  # would step act's policy let its agent run go test?
  cat > req.json <<'EOF'
  {"kind": "permission", "tool": {"kind": "execute", "title": "go test ./...",
   "command": "go test ./..."}, "options": [{"id": "a1", "kind": "allow_once"}]}
  EOF
  acpflow policy eval workflows/examples/policies.yaml --step act --request req.json`,
		Args: cli.Args("a workflow or a bare policy file", "FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if request == "" {
				return cli.UsageErrorf("--request REQ.json is required")
			}
			pol, err := loadPolicies(args[0], step)
			if err != nil {
				return err
			}
			if pol.outer, err = loadOuter(policy); err != nil {
				return err
			}
			data, err := readRequest(request)
			if err != nil {
				return cli.UsageErrorf("--request: %v", err)
			}
			var head struct {
				Kind string `json:"kind"`
			}
			if err := json.Unmarshal(data, &head); err != nil {
				return cli.UsageErrorf("--request %s: not a JSON object: %v", request, err)
			}
			var answer any
			switch head.Kind {
			case policies.KindPermission:
				answer, err = evalPermission(cmd, pol, data)
			case policies.KindEnv:
				answer, err = evalEnv(cmd, pol, data)
			default:
				return cli.UsageErrorf("--request %s: \"kind\" must be %q or %q, got %q", request, policies.KindPermission, policies.KindEnv, head.Kind)
			}
			if err != nil {
				return cli.UsageErrorf("--request %s: %v", request, err)
			}
			b, _ := json.MarshalIndent(answer, "", "  ")
			fmt.Fprintln(cmd.OutOrStdout(), string(b))
			return nil
		},
	}
	eval.Flags().StringVar(&request, "request", "", "the request, a JSON file (see docs/policies.md)")
	eval.Flags().StringVar(&step, "step", "", "evaluate this step's policy (a workflow FILE only)")
	addPolicyFlag(eval, &policy)
	cmd.AddCommand(eval, newPolicyTestCmd())
	return cmd
}

// boundPolicies are the policies that answer, with where they came from
// (engine.PoliciesOf), and the outer policy they answer within.
type boundPolicies struct {
	engine.StepPolicies
	outer policies.Outer
}

// loadPolicies reads FILE as a workflow if it is one, else as a bare policy
// file, which stands for a workflow's policies; the policies that answer
// are those a run gives step (engine.PoliciesOf).
func loadPolicies(file, step string) (*boundPolicies, error) {
	src, err := workflows.ReadFile(file, "policy or workflow file")
	if err != nil {
		return nil, cli.UsageError(err)
	}
	if workflows.IsWorkflow(src) {
		wf, err := workflows.Load(file)
		if err != nil {
			return nil, cli.UsageError(err)
		}
		var st *engine.Step
		if step != "" {
			if st = findStep(wf, step); st == nil {
				ids := make([]string, len(wf.Steps))
				for i, s := range wf.Steps {
					ids[i] = s.ID
				}
				return nil, cli.UsageErrorf("--step: %s in %s", suggest.Unknown("step", step, ids), file)
			}
		}
		return &boundPolicies{StepPolicies: engine.PoliciesOf(wf, st)}, nil
	}
	if step != "" {
		return nil, cli.UsageErrorf("--step goes with a workflow file; %s is a policy file", file)
	}
	p, err := workflows.LoadPolicyFile(file)
	if err != nil {
		return nil, cli.UsageError(err)
	}
	return &boundPolicies{StepPolicies: engine.PoliciesOf(&engine.Workflow{Policies: p}, nil)}, nil
}

// maxRequestSize bounds --request: a request is a few KiB; a pipe or
// /dev/zero must not be read until memory runs out. A pipe is allowed
// (--request <(…)), so the file is not required to be a regular one.
const maxRequestSize = 16 << 20

func readRequest(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxRequestSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxRequestSize {
		return nil, fmt.Errorf("%s: more than %d bytes (16 MiB); a request is one JSON object of a few KiB", path, maxRequestSize)
	}
	return data, nil
}

func findStep(wf *engine.Workflow, id string) *engine.Step {
	for _, s := range wf.Steps {
		if s.ID == id {
			return s
		}
	}
	return nil
}

func evalPermission(cmd *cobra.Command, b *boundPolicies, data []byte) (any, error) {
	req, err := policies.DecodePermissionRequest(data)
	if err != nil {
		return nil, err
	}
	rec := b.outer.Answer(cmd.Context(), b.Permission, b.PermissionSource, req)
	return map[string]any{
		"decision": rec.Decision, "reason": rec.Reason, "rule": rec.Rule, "policy": rec.Policy, "layer": rec.Layer,
		"outcome": rec.Outcome, "option_id": rec.OptionID,
	}, nil
}

func evalEnv(cmd *cobra.Command, b *boundPolicies, data []byte) (any, error) {
	var req policies.EnvRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, err
	}
	if req.Ambient == nil {
		req.Ambient = map[string]string{}
	}
	if req.Explicit == nil {
		req.Explicit = map[string]string{}
	}
	dec, err := b.outer.BuildEnv(cmd.Context(), b.Env, &req)
	answer := map[string]any{"policy": b.EnvSource, "layer": policies.LayerWorkflow}
	if dec.Outer != nil {
		answer["outer"] = dec.Outer
	}
	var refused *policies.OuterEnvError
	switch {
	case errors.As(err, &refused):
		answer["deny"], answer["policy"], answer["layer"] = refused.Error(), refused.File, policies.LayerOuter
		if refused.Rule != "" {
			answer["rule"] = refused.Rule
		}
	case err != nil:
		// Fail closed, as a run would: the spawn is refused.
		answer["deny"] = "env policy failed: " + err.Error()
	case dec.Deny != "":
		answer["deny"], answer["rule"] = dec.Deny, dec.Rule
	default:
		answer["env"], answer["rule"] = dec.Env, dec.Rule
	}
	return answer, nil
}
