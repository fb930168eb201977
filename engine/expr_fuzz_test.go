package engine

import (
	"strings"
	"testing"
)

// FuzzExpressions compiles every input as a template and as a condition
// and evaluates what compiles: nothing may panic, fail with a fatal
// error (exprguard bounds what an evaluation builds), or put a value of
// env in an error.
func FuzzExpressions(f *testing.F) {
	for _, s := range []string{
		`${{ inputs.task }}-${{ steps.plan.output }}`,
		`steps.plan.output == "ok" && inputs.n > 1`,
		`reduce(1..40, #acc + #acc, "x")`,
		`repeat(repeat("x", 1000), 1000)`,
		`join(map(1..100, steps.plan.output), ",")`,
		`int(env.TOKEN)`,
		`"x" matches env.TOKEN`,
		`toJSON(env)`,
		`date(env.TOKEN, "2006")`,
		`!steps.plan.json.ok`,
		`replace(inputs.task, "", "--")`,
		`${{ string(1..10) }}${{ toBase64(inputs.task) }}`,
	} {
		f.Add(s)
	}
	const secret = "tok-s3cr3t-[x"
	f.Fuzz(func(t *testing.T, src string) {
		scope := &Scope{
			Inputs: map[string]any{"task": "do it", "n": 2.0},
			Env:    map[string]any{"TOKEN": secret},
			Steps:  map[string]any{"plan": map[string]any{"output": "ok", "status": "succeeded", "stop_reason": "completed", "json": nil}},
			Run:    map[string]any{"id": "r", "workspace": "/ws"},
		}
		check := func(err error) {
			if err != nil && strings.Contains(err.Error(), secret) {
				// A value the expression writes into its own text (as a
				// literal) is the author's; one that came from env is not.
				if !strings.Contains(src, secret) {
					t.Fatalf("the error shows env.TOKEN: %v", err)
				}
			}
		}
		if tpl, err := ParseTemplate(src); err == nil {
			_, err := tpl.Render(scope)
			check(err)
		}
		if e, err := CompileExpr(src); err == nil {
			_, err := e.Bool(scope)
			check(err)
		}
	})
}
