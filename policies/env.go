package policies

import (
	"context"
	"fmt"
)

// EnvRequest is the input of an env policy: the ambient environment of
// acpflow and the explicit values the workflow sets (agent env, then step
// env layered over it).
type EnvRequest struct {
	Request
	Ambient  map[string]string `json:"ambient"`
	Explicit map[string]string `json:"explicit"`
}

// EnvDecision is an env policy's answer: the child's whole environment, or
// a refusal to spawn.
type EnvDecision struct {
	Env  map[string]string // the child's complete environment
	Deny string            // non-empty: refuse the spawn, with this reason
	Rule string            // what decided, for the record
	// Stderr is what a WASM policy module wrote to stderr (capped).
	Stderr string
	// Outer is what each outer policy file decided before this policy
	// (Outer.BuildEnv); nil without an outer env policy.
	Outer []OuterEnvRule
}

// Env builds a child's environment before each spawn. Implementations must
// be safe for concurrent use.
type Env interface {
	DecideEnv(ctx context.Context, req *EnvRequest) (EnvDecision, error)
}

// BuildEnv asks p for a child's environment, the one place that does, and
// fails closed: a nil policy is the default one, a panic is an error, and
// an error (or a Deny) means the caller must not spawn.
func BuildEnv(ctx context.Context, p Env, req *EnvRequest) (dec EnvDecision, err error) {
	if p == nil {
		p = DefaultEnv()
	}
	defer func() {
		if r := recover(); r != nil {
			dec, err = EnvDecision{}, fmt.Errorf("panic: %v", r)
		}
	}()
	return p.DecideEnv(ctx, req)
}
