package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/acpflow/acpflow/engine"
)

// InputError is a problem with the inputs given to a run: an undeclared
// key, a missing required input, or a value that is not of the declared
// type. Nothing has started when one is returned; the CLI exits with 2.
type InputError struct {
	Input string // the input concerned; "" when the problem is the flag's form
	Msg   string // a whole sentence, naming the input
}

// Error returns the message, which names the input itself.
func (e *InputError) Error() string { return e.Msg }

func inputErrorf(input, format string, args ...any) *InputError {
	return &InputError{Input: input, Msg: fmt.Sprintf(format, args...)}
}

// ParseInputFlags reads `--input KEY=VALUE` flags, converting each VALUE to
// the declared type of KEY: a number (42, 2.5), a boolean (true, false), or
// JSON for an object or an array; a string is taken as is. It does not
// apply defaults or check required inputs: ResolveInputs does, for flags
// and batch lines alike.
//
// Every problem is an *InputError; several are joined (errors.Join).
func ParseInputFlags(wf *engine.Workflow, kv []string) (map[string]any, error) {
	out := make(map[string]any, len(kv))
	var errs []error
	for _, s := range kv {
		key, value, ok := strings.Cut(s, "=")
		if !ok || key == "" {
			errs = append(errs, inputErrorf("", "--input %q: want KEY=VALUE", s))
			continue
		}
		in := declaredInput(wf, key)
		if in == nil {
			errs = append(errs, unknownInput(wf, key))
			continue
		}
		if _, dup := out[key]; dup {
			errs = append(errs, inputErrorf(key, "input %q is given twice", key))
			continue
		}
		v, err := parseInputValue(in.Type, value)
		if err != nil {
			errs = append(errs, inputErrorf(key, "input %q %v", key, err))
			continue
		}
		out[key] = v
	}
	return out, errors.Join(errs...)
}

// ResolveInputs checks the inputs given to one run (from flags or one JSONL
// line) against the declarations and returns the run's inputs: every
// declared input, given or defaulted.
//
// # Notes
//
// A null value counts as not given, since JSON writers emit null for an
// absent field. An optional input with no default gets its type's zero
// value ("", 0, false, {}, []), as GitHub Actions does, so that a template
// renders something sensible rather than null. Numbers are float64, as
// JSON decodes them; 42 still renders as 42.
func ResolveInputs(wf *engine.Workflow, given map[string]any) (map[string]any, error) {
	var errs []error
	for _, k := range sortedKeys(given) {
		if declaredInput(wf, k) == nil {
			errs = append(errs, unknownInput(wf, k))
		}
	}
	out := make(map[string]any, len(wf.Inputs))
	for _, in := range wf.Inputs {
		v, ok := given[in.Name]
		switch {
		case ok && v != nil:
			c, err := convertInput(in.Type, v)
			if err != nil {
				errs = append(errs, inputErrorf(in.Name, "input %q %v", in.Name, err))
				continue
			}
			out[in.Name] = c
		case in.HasDefault:
			out[in.Name] = in.Default
		case in.Required:
			errs = append(errs, inputErrorf(in.Name, "missing required input %q (%s)", in.Name, in.Type))
		default:
			out[in.Name] = zeroValue(in.Type)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

func declaredInput(wf *engine.Workflow, name string) *engine.Input {
	for _, in := range wf.Inputs {
		if in.Name == name {
			return in
		}
	}
	return nil
}

func unknownInput(wf *engine.Workflow, name string) *InputError {
	if len(wf.Inputs) == 0 {
		return inputErrorf(name, "unknown input %q: the workflow declares no inputs", name)
	}
	names := make([]string, len(wf.Inputs))
	for i, in := range wf.Inputs {
		names[i] = in.Name
	}
	sort.Strings(names)
	msg := fmt.Sprintf("unknown input %q (declared: %s)", name, strings.Join(names, ", "))
	if s := closestWord(name, names); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	return inputErrorf(name, "%s", msg)
}

// parseInputValue converts the text of a flag to the declared type.
func parseInputValue(typ, s string) (any, error) {
	switch typ {
	case "number":
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("must be a number, got %q", s)
		}
		return f, nil
	case "boolean":
		switch s {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, fmt.Errorf("must be true or false, got %q", s)
	case "object", "array":
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			return nil, fmt.Errorf("must be a JSON %s, got %q: %v", typ, s, err)
		}
		return convertInput(typ, v)
	}
	return s, nil
}

// convertInput checks a decoded value (from YAML or JSON) against the
// declared type, and normalizes numbers to float64 at every depth, so a
// default from the file and a value from a JSON line are the same Go value.
func convertInput(typ string, v any) (any, error) {
	bad := func() (any, error) {
		article := "a"
		if typ == "object" || typ == "array" {
			article = "an"
		}
		return nil, fmt.Errorf("must be %s %s, got %s", article, typ, describeValue(v))
	}
	switch typ {
	case "string":
		if s, ok := v.(string); ok {
			return s, nil
		}
	case "number":
		if f, ok := toFloat(v); ok {
			return f, nil
		}
	case "boolean":
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case "object":
		if m, ok := v.(map[string]any); ok {
			return normalize(m), nil
		}
	case "array":
		if l, ok := v.([]any); ok {
			return normalize(l), nil
		}
	}
	return bad()
}

func toFloat(v any) (float64, bool) {
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case float32:
		f = float64(x)
	case int:
		f = float64(x)
	case int64:
		f = float64(x)
	case uint64:
		f = float64(x)
	case json.Number:
		p, err := x.Float64()
		if err != nil {
			return 0, false
		}
		f = p
	default:
		return 0, false
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = normalize(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = normalize(e)
		}
		return l
	}
	if f, ok := toFloat(v); ok {
		return f
	}
	return v
}

func zeroValue(typ string) any {
	switch typ {
	case "number":
		return float64(0)
	case "boolean":
		return false
	case "object":
		return map[string]any{}
	case "array":
		return []any{}
	}
	return ""
}

func describeValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("the string %q", x)
	case bool:
		return fmt.Sprintf("the boolean %t", x)
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	if f, ok := toFloat(v); ok {
		return "the number " + strconv.FormatFloat(f, 'g', -1, 64)
	}
	return fmt.Sprintf("%T", v)
}
