package flow

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/acpflow/acpflow/engine"
)

// inlineMax is the largest step result carried in a Temporal payload as
// is; a larger one goes to Blobs and travels by hash. Temporal refuses a
// payload over 2 MiB and ends a history at 50 MiB, and every attempt's
// result stays in the history: at 16 KiB, over 3,000 attempts with large
// outputs fit (most agents' answers are a few KiB, and stay inline).
const inlineMax = 16 << 10

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

// payloadMax is what a workflow's result or an activity's input may hold
// of step results inline: half of Temporal's 2 MiB limit, for the rest.
const payloadMax = 1 << 20

// shrink moves the largest inline results of m to Blobs until what stays
// inline is at most payloadMax: a run of many steps, each under inlineMax,
// would otherwise outgrow one payload. It is deterministic (largest
// first, then by id), as workflow code must be.
func (b Blobs) shrink(m map[string]Stored) error {
	type entry struct {
		id   string
		data []byte
	}
	var inline []entry
	total := 0
	for id, st := range m {
		if st.Result == nil {
			continue
		}
		data, err := json.Marshal(st.Result)
		if err != nil {
			return err
		}
		inline = append(inline, entry{id, data})
		total += len(data)
	}
	slices.SortFunc(inline, func(a, b entry) int {
		if len(a.data) != len(b.data) {
			return len(b.data) - len(a.data)
		}
		return strings.Compare(a.id, b.id)
	})
	for _, e := range inline {
		if total <= payloadMax {
			break
		}
		ref, err := b.Put(e.data)
		if err != nil {
			return err
		}
		m[e.id] = Stored{Ref: ref}
		total -= len(e.data)
	}
	return nil
}
