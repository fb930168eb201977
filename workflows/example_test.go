package workflows_test

import (
	"errors"
	"fmt"

	_ "github.com/acpflow/acpflow/steps/acpsubagent"
	"github.com/acpflow/acpflow/workflows"
)

func ExampleParse() {
	src := []byte(`name: review
agents:
  demo: {builtin: demo}
steps:
  - id: plan
    uses: acp-subagent
    with: {agent: demo, prompt: "Plan ${{ inputs.task }}"}
  - id: review
    nedds: plan
    uses: acp-subagent
    with: {agent: demo, prompt: "Review ${{ steps.plan.output }}"}
`)
	_, err := workflows.Parse("review.yaml", src)
	var es workflows.Errors
	if errors.As(err, &es) {
		fmt.Println(len(es), "errors")
		fmt.Println(err)
	}
	// Output:
	// 3 errors
	// review.yaml:7:43: unknown input "task": the workflow declares no inputs (add it under inputs:)
	//  7 |     with: {agent: demo, prompt: "Plan ${{ inputs.task }}"}
	//    |                                           ^
	// review.yaml:9:5: step "review": unknown key "nedds"; did you mean "needs"?
	//  9 |     nedds: plan
	//    |     ^
	// review.yaml:11:45: step "review" refers to steps.plan but does not need it (add plan to needs)
	//  11 |     with: {agent: demo, prompt: "Review ${{ steps.plan.output }}"}
	//     |                                             ^
}

func ExampleResolveInputs() {
	wf, err := workflows.Parse("hello.yaml", []byte(`name: hello
inputs:
  who: {type: string, default: world}
  times: {type: number, required: true}
agents:
  demo: {builtin: demo}
steps:
  - {id: greet, uses: acp-subagent, with: {agent: demo, prompt: "Hello ${{ inputs.who }}"}}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	given, err := workflows.ParseInputFlags(wf, []string{"times=3"})
	if err != nil {
		fmt.Println(err)
		return
	}
	inputs, err := workflows.ResolveInputs(wf, given)
	fmt.Println(inputs, err)

	_, err = workflows.ResolveInputs(wf, map[string]any{"who": "Ada"})
	fmt.Println(err)
	// Output:
	// map[times:3 who:world] <nil>
	// missing required input "times" (number)
}
