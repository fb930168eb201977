package engine

import (
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

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
		{`${{ [1, "a"] }} ${{ nil }} ${{ {"k": 1} }}`, `[1,"a"]  {"k":1}`},
		// nil is "" wherever it comes from, as GitHub Actions renders it;
		// inside a list or map it stays JSON's null.
		{`[${{ env.UNSET }}]`, "[]"},
		{`[${{ env["UNSET"] }}][${{ env.UNSET2 }}]`, "[][]"},
		{`${{ steps.plan.json }}|${{ steps.plan.exit_code }}|${{ steps.plan.nothere }}`, "||"},
		{`${{ inputs.missing }}`, ""},
		{`${{ [env.UNSET] }} ${{ {"k": env.UNSET} }}`, `[null] {"k":null}`},
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

// TestExpressionsCannotExhaustMemory: every way to make a string grow past
// its inputs ends in an error, with a bounded allocation and time, in a
// template, a condition and a for-each alike (issue 11).
func TestExpressionsCannotExhaustMemory(t *testing.T) {
	big := strings.Repeat("x", 8<<20) // a step's output at the default max-output
	scope := &Scope{
		Inputs: map[string]any{}, Env: map[string]any{},
		Steps: map[string]any{"a": map[string]any{"output": big}},
	}
	for _, src := range []string{
		`reduce(1..40, #acc + #acc, "x")`,
		`reduce(1..40, #acc + "" + #acc, steps.a.output)`,
		`repeat(repeat("x", 1000), 1000000)`,
		`repeat(repeat(repeat("ab", 1000), 1000), 1000)`,
		`join(map(1..100, steps.a.output), ",")`,
		`join(map(1..100000, repeat("y", 1000)))`,
		`replace(steps.a.output, "x", "xxxxxxxxxx")`,
		`reduce(1..30, replace(#acc, "x", "xx"), "x")`,
		`toJSON(map(1..100, steps.a.output))`,
		`string(map(1..1000, steps.a.output))`,
		`reduce(1..40, toBase64(#acc), steps.a.output)`,
		`len(reduce(1..30, [#acc, #acc], "x") | toJSON())`,
		`reduce(1..40, #acc + #acc, "x") == "y"`,
		`steps.a.output + steps.a.output + steps.a.output + steps.a.output + steps.a.output + steps.a.output + steps.a.output + steps.a.output + steps.a.output`,
	} {
		t.Run(src, func(t *testing.T) {
			e, err := CompileExpr(src)
			if err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			_, err = e.Eval(scope)
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			if err == nil || !strings.Contains(err.Error(), "64 MiB") {
				t.Fatalf("err = %v, want the 64 MiB bound", err)
			}
			// Measured: at most ~140 MiB allocated and 60 ms (the 8 MiB
			// copies); the bounds are generous for a shared machine.
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<30 {
				t.Errorf("allocated %d MiB", alloc>>20)
			}
			if took > 30*time.Second { // a hang guard: 60 ms idle
				t.Errorf("took %v", took)
			}
		})
	}
}

// TestGuardedOperationsKeepTheirMeaning: the rewritten operations give
// what expr's own give.
func TestGuardedOperationsKeepTheirMeaning(t *testing.T) {
	scope := &Scope{Inputs: map[string]any{"s": "ab", "n": 2.0, "l": []any{"x", "y"}}}
	for src, want := range map[string]any{
		`inputs.s + "c"`:                   "abc",
		`inputs.n + 1`:                     3.0,
		`1 + 2`:                            3,
		`reduce(1..3, #acc + #acc, "x")`:   "xxxxxxxx",
		`repeat(inputs.s, 2)`:              "abab",
		`join(inputs.l, "-")`:              "x-y",
		`join(["a", "b"])`:                 "ab",
		`replace("aaa", "a", "bb")`:        "bbbbbb",
		`replace("aaa", "a", "b", 2)`:      "bba",
		`replace("ab", "", "-")`:           "-a-b-",
		`toJSON({"a": [1]})`:               "{\n  \"a\": [\n    1\n  ]\n}",
		`string([1, "a"])`:                 "[1 a]",
		`toBase64("hi")`:                   "aGk=",
		`inputs.l | join(",")`:             "x,y",
		`(now() + duration("1h")) > now()`: true,
	} {
		e, err := CompileExpr(src)
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		got, err := e.Eval(scope)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v, %v; want %#v", src, got, err, want)
		}
	}
}

// TestErrorsNeverShowEnvValues: an expression that fails on a value of
// env must not put the value in its error (issue 11), whatever the
// function that quotes it.
func TestErrorsNeverShowEnvValues(t *testing.T) {
	const secret = "s3cr3t-2024-[tok"
	scope := &Scope{
		Inputs: map[string]any{}, Steps: map[string]any{},
		Env: map[string]any{"MY_SECRET": secret, "SHORT": "ab", "PATH": "/usr/bin"},
	}
	for _, src := range []string{
		`int(env.MY_SECRET)`,
		`float(env.MY_SECRET)`,
		`duration(env.MY_SECRET)`,
		`date(env.MY_SECRET)`,
		`date(env.MY_SECRET, "2006")`,
		`fromJSON(env.MY_SECRET)`,
		`"x" matches env.MY_SECRET`,
		`"x" matches ("(" + env.MY_SECRET)`,
		`int(env.SHORT)`,
		`fromJSON(toJSON(env)).MY_SECRET > 1`,
		`env.MY_SECRET.x`,
		`timezone(env.MY_SECRET)`,
	} {
		t.Run(src, func(t *testing.T) {
			e, err := CompileExpr(src)
			if err != nil {
				t.Skipf("does not compile: %v", err)
			}
			_, err = e.Eval(scope)
			if err == nil {
				t.Fatal("no error")
			}
			for _, leak := range []string{secret, "s3cr3t", "2024-[tok", `"ab"`, "(ab)"} {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("the error shows %q:\n%v", leak, err)
				}
			}
		})
	}
	// A condition's value and a for-each's are described in errors too.
	for _, src := range []string{`env.MY_SECRET`, `env.SHORT`} {
		e, _ := CompileExpr(src)
		if _, err := e.Bool(scope); err == nil || strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), `"ab"`) {
			t.Errorf("Bool(%s): %v", src, err)
		}
	}
}

func TestTestedEnvNamesTheVariablesAnExpressionHandlesUnsetItself(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want []string
	}{
		{`env.A ?? "default"`, []string{"A"}},
		{`env.A == nil || env.B != nil`, []string{"A", "B"}},
		{`nil == env["C"] ? "x" : env.D`, []string{"C"}},
		// nil == "" is false: a comparison with "" does not handle unset.
		{`env.E == ""`, nil},
		{`"[" + env.F + "]"`, nil},
		{`len(env.G) > 0`, nil},
		{`steps.a.output == env.H`, nil},
	} {
		e, err := CompileExpr(tc.src)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		got := e.TestedEnv()
		if len(got) != len(tc.want) {
			t.Errorf("%s: %v, want %v", tc.src, got, tc.want)
		}
		for _, w := range tc.want {
			if !got[w] {
				t.Errorf("%s: %v, want %v", tc.src, got, tc.want)
			}
		}
	}
}
