package workflows_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/workflows"
)

func inputsWorkflow() *engine.Workflow {
	return &engine.Workflow{Inputs: []*engine.Input{
		{Name: "task", Type: "string", Required: true},
		{Name: "depth", Type: "number", Default: 2.0, HasDefault: true},
		{Name: "fast", Type: "boolean"},
		{Name: "opts", Type: "object"},
		{Name: "files", Type: "array"},
	}}
}

func TestParseInputFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		flags   []string
		want    map[string]any
		wantErr string
	}{
		{name: "a string is taken as is, = signs included", flags: []string{"task=a=b c"}, want: map[string]any{"task": "a=b c"}},
		{name: "a number becomes a float64", flags: []string{"depth=42"}, want: map[string]any{"depth": 42.0}},
		{name: "a fractional number is kept", flags: []string{"depth=2.5"}, want: map[string]any{"depth": 2.5}},
		{name: "a boolean is true or false", flags: []string{"fast=true"}, want: map[string]any{"fast": true}},
		{name: "an object is JSON", flags: []string{`opts={"a": 1}`}, want: map[string]any{"opts": map[string]any{"a": 1.0}}},
		{name: "an array is JSON", flags: []string{`files=["x"]`}, want: map[string]any{"files": []any{"x"}}},
		{name: "an empty value is an empty string", flags: []string{"task="}, want: map[string]any{"task": ""}},
		{name: "an undeclared key lists the declared ones", flags: []string{"x=1"}, wantErr: `unknown input "x" (declared: depth, fast, files, opts, task)`},
		{name: "a near miss suggests the input", flags: []string{"tsk=1"}, wantErr: `did you mean "task"?`},
		{name: "a number that is not one is refused", flags: []string{"depth=deep"}, wantErr: `input "depth" must be a number, got "deep"`},
		{name: "NaN is not a number here", flags: []string{"depth=NaN"}, wantErr: `must be a number`},
		{name: "yes is not a boolean", flags: []string{"fast=yes"}, wantErr: `input "fast" must be true or false, got "yes"`},
		{name: "an array is not an object", flags: []string{"opts=[1]"}, wantErr: `input "opts" must be an object, got an array`},
		{name: "broken JSON is refused", flags: []string{"opts={"}, wantErr: `must be a JSON object`},
		{name: "a flag without = is refused", flags: []string{"task"}, wantErr: `--input "task": want KEY=VALUE`},
		{name: "a key given twice is refused", flags: []string{"task=a", "task=b"}, wantErr: `input "task" is given twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := workflows.ParseInputFlags(inputsWorkflow(), tc.flags)
			checkInputResult(t, got, err, tc.want, tc.wantErr)
		})
	}
}

func TestResolveInputs(t *testing.T) {
	zeros := map[string]any{"depth": 2.0, "fast": false, "opts": map[string]any{}, "files": []any{}}
	with := func(extra map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range zeros {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		given   map[string]any
		want    map[string]any
		wantErr string
	}{
		{name: "defaults and zero values fill what is not given", given: map[string]any{"task": "t"}, want: with(map[string]any{"task": "t"})},
		{name: "a given value replaces the default", given: map[string]any{"task": "t", "depth": 5.0}, want: with(map[string]any{"task": "t", "depth": 5.0})},
		{name: "an int from Go code becomes a float64", given: map[string]any{"task": "t", "depth": 7}, want: with(map[string]any{"task": "t", "depth": 7.0})},
		{name: "null counts as not given", given: map[string]any{"task": "t", "depth": nil}, want: with(map[string]any{"task": "t"})},
		{name: "numbers inside objects are float64", given: map[string]any{"task": "t", "opts": map[string]any{"n": 1}}, want: with(map[string]any{"task": "t", "opts": map[string]any{"n": 1.0}})},
		{name: "a missing required input is refused", given: map[string]any{}, wantErr: `missing required input "task" (string)`},
		{name: "a value of the wrong type is refused", given: map[string]any{"task": 3.0}, wantErr: `input "task" must be a string, got the number 3`},
		{name: "an undeclared key is refused", given: map[string]any{"task": "t", "extra": 1}, wantErr: `unknown input "extra"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := workflows.ResolveInputs(inputsWorkflow(), tc.given)
			checkInputResult(t, got, err, tc.want, tc.wantErr)
		})
	}
}

func TestResolveInputsReportsEveryProblem(t *testing.T) {
	_, err := workflows.ResolveInputs(inputsWorkflow(), map[string]any{"extra": 1, "fast": "no"})
	for _, want := range []string{`unknown input "extra"`, `input "fast" must be a boolean`, `missing required input "task"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
}

func checkInputResult(t *testing.T, got map[string]any, err error, want map[string]any, wantErr string) {
	t.Helper()
	if wantErr != "" {
		var ie *workflows.InputError
		if !errors.As(err, &ie) {
			t.Fatalf("error = %v (%T), want an *InputError", err, err)
		}
		if !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("error = %q, want it to contain %q", err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v, want %#v", got, want)
	}
}
