package engine

import "testing"

func TestExpressionsCompileAndRunOverTheScope(t *testing.T) {
	scope := &Scope{
		Inputs: map[string]any{"task": "x", "n": 2.0}, Env: map[string]any{"HOME": "/h"},
		Steps:    map[string]any{"plan": map[string]any{"output": "ok", "status": "succeeded", "stop_reason": "completed", "json": nil}},
		Run:      map[string]any{"id": "r1", "workspace": "/ws"},
		Workflow: map[string]any{"name": "wf"},
		Item:     map[string]any{"name": "a"}, Index: 3,
	}
	for _, tc := range []struct{ src, want string }{
		{`${{ inputs.task }}-${{ inputs.n }}`, "x-2"},
		{`${{ steps.plan.output }} ${{ steps.plan.stop_reason == "completed" }}`, "ok true"},
		{`${{ item.name }}#${{ index }}`, "a#3"},
		{`${{ toJSON([1, "a"]) }}`, "[\n  1,\n  \"a\"\n]"},
		{`${{ [1, "a"] }} ${{ nil }} ${{ {"k": 1} }}`, `[1,"a"] null {"k":1}`},
		{`${{ trim("  x ") }}|${{ join(["a","b"], ",") }}|${{ fromJSON("{\"a\":1}").a }}`, "x|a,b|1"},
		{`${{ env.HOME }}${{ run.workspace }} ${{ workflow.name }}`, "/h/ws wf"},
		{`no template`, "no template"},
	} {
		t.Run(tc.src, func(t *testing.T) {
			tpl, err := ParseTemplate(tc.src)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tpl.Render(scope)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestExpressionErrorsAreCaughtAtCompileTime(t *testing.T) {
	for _, src := range []string{`foo.bar`, `steps.plan.output ==`, `1 +`, `index.x`} {
		if _, err := CompileExpr(src); err == nil {
			t.Errorf("%s compiled", src)
		}
	}
	if _, err := ParseTemplate("a ${{ inputs.x "); err == nil {
		t.Error("an unclosed template parsed")
	}
}

func BenchmarkCompileExpr(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, err := CompileExpr(`steps.plan.stop_reason == "completed" && inputs.depth > 1`); err != nil {
			b.Fatal(err)
		}
	}
}
