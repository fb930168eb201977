package flow

import (
	"encoding/json"
	"fmt"

	"github.com/acpflow/acpflow/engine"
)

// inlineMax is the largest step result carried in a Temporal payload as
// is; a larger one goes to Blobs and travels by hash. Temporal refuses a
// payload over 2 MiB and a history over 50 MiB; a quarter of a MiB keeps
// many steps' results, and the task that carries a step's ancestors, far
// below both.
const inlineMax = 256 << 10

// Stored is a step result as Temporal carries it: inline, or by the hash
// of its JSON in Blobs.
type Stored struct {
	Result *engine.StepResult `json:",omitempty"`
	Ref    string             `json:",omitempty"`
}

// store is res as a payload: inline when small, else by reference.
func (b Blobs) store(res *engine.StepResult) (Stored, error) {
	data, err := json.Marshal(res)
	if err != nil {
		return Stored{}, fmt.Errorf("a step result cannot be encoded: %w", err)
	}
	if len(data) <= inlineMax {
		return Stored{Result: res}, nil
	}
	ref, err := b.Put(data)
	if err != nil {
		return Stored{}, err
	}
	return Stored{Ref: ref}, nil
}

// Load is the result s holds or names.
func (b Blobs) Load(s Stored) (*engine.StepResult, error) {
	if s.Ref == "" {
		if s.Result == nil {
			return nil, fmt.Errorf("an empty step result")
		}
		return s.Result, nil
	}
	data, err := b.Get(s.Ref)
	if err != nil {
		return nil, err
	}
	var res engine.StepResult
	if err := json.Unmarshal(data, &res); err != nil {
		return nil, fmt.Errorf("blob %s: %w", s.Ref, err)
	}
	return &res, nil
}
