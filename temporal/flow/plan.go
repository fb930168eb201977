package flow

import (
	"context"
	"fmt"
	"time"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/steps"
)

// Plan is what the Temporal workflow needs of an acpflow workflow to
// schedule it: its DAG and its expressions as source, compiled again in
// the workflow (a pure function of the source). It holds no agent, no
// policy and no file: those are the workers'.
type Plan struct {
	Name        string
	MaxParallel int // resolved: never 0
	Steps       []PlanStep
	Outputs     []PlanOutput
	// Budget is what one run may spend (budget:); zero: no limit.
	Budget engine.Budget `json:",omitempty"`
}

// PlanStep is one step's scheduling.
type PlanStep struct {
	ID                 string
	Needs              []string      `json:",omitempty"`
	If                 string        `json:",omitempty"`
	ForEach            string        `json:",omitempty"`
	ForEachMaxParallel int           `json:",omitempty"`
	Retries            int           `json:",omitempty"`
	Timeout            time.Duration `json:",omitempty"`
	ContinueOnError    bool          `json:",omitempty"`
	// Structured says the step's steps.ID.json is its schema-checked value.
	Structured bool `json:",omitempty"`
}

// PlanOutput is one of the run's outputs, a template.
type PlanOutput struct{ Name, Template string }

// PlanOf is the plan of a loaded workflow. A max-parallel of 0 (the
// number of CPUs on the CLI) becomes the submitting machine's.
func PlanOf(wf *engine.Workflow) Plan {
	p := Plan{Name: wf.Name, MaxParallel: wf.MaxParallel, Budget: wf.Budget}
	if p.MaxParallel <= 0 { // a workflow not from the loader: settled here, at submit, as the loader would
		p.MaxParallel = engine.DefaultMaxParallel()
	}
	for _, st := range wf.Steps {
		ps := PlanStep{
			ID: st.ID, Needs: st.Needs, ForEachMaxParallel: st.ForEachMaxParallel, Retries: st.Retries,
			Timeout: st.Timeout, ContinueOnError: st.ContinueOnError, Structured: st.Structured(),
		}
		if st.If != nil {
			ps.If = st.If.Source
		}
		if st.ForEach != nil {
			ps.ForEach = st.ForEach.Source
		}
		p.Steps = append(p.Steps, ps)
	}
	for _, o := range wf.Outputs {
		p.Outputs = append(p.Outputs, PlanOutput{Name: o.Name, Template: o.Value.Source})
	}
	return p
}

// workflow compiles the plan into the engine's form, so that the engine's
// own SkipReason, Scope, Items, Combine and RenderOutputs decide.
func (p Plan) workflow() (*engine.Workflow, error) {
	if p.MaxParallel <= 0 {
		return nil, fmt.Errorf("plan %s: max-parallel %d (a plan made by PlanOf always has one)", p.Name, p.MaxParallel)
	}
	wf := &engine.Workflow{Name: p.Name, MaxParallel: p.MaxParallel, Budget: p.Budget}
	for _, ps := range p.Steps {
		st := &engine.Step{
			ID: ps.ID, Needs: ps.Needs, Retries: ps.Retries, Timeout: ps.Timeout,
			ContinueOnError: ps.ContinueOnError, ForEachMaxParallel: ps.ForEachMaxParallel,
			Run: planned{structured: ps.Structured},
		}
		var err error
		if ps.If != "" {
			if st.If, err = engine.CompileExpr(ps.If); err != nil {
				return nil, fmt.Errorf("step %s: if: %w", ps.ID, err)
			}
		}
		if ps.ForEach != "" {
			if st.ForEach, err = engine.CompileExpr(ps.ForEach); err != nil {
				return nil, fmt.Errorf("step %s: for-each: %w", ps.ID, err)
			}
		}
		wf.Steps = append(wf.Steps, st)
	}
	for _, o := range p.Outputs {
		t, err := engine.ParseTemplate(o.Template)
		if err != nil {
			return nil, fmt.Errorf("outputs.%s: %w", o.Name, err)
		}
		wf.Outputs = append(wf.Outputs, &engine.Output{Name: o.Name, Value: t})
	}
	return wf, nil
}

// planned stands for a step's kind in the workflow, where no step runs:
// it only says whether the step is structured.
type planned struct{ structured bool }

func (planned) Run(context.Context, *steps.Invocation) steps.Result {
	return steps.Result{StopReason: steps.Error, Err: fmt.Errorf("a planned step does not run in the workflow")}
}

// JSONShape implements steps.StructuredStep: any value, when structured.
func (p planned) JSONShape() *steps.Shape {
	if p.structured {
		return &steps.Shape{}
	}
	return nil
}
