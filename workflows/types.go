package workflows

import (
	"reflect"

	"github.com/acpflow/acpflow/engine"
)

// checkTypes refuses an `if:` that cannot give a boolean and a for-each
// that cannot give a list, from the types the file declares (inputs, and
// which steps are for-each ones). It runs after checkRefs, so that an
// expression naming something unknown is reported once, there.
//
// # Notes
//
// Only what is certain is refused: an expression whose type depends on
// the run (a step's json, an item) passes, and the engine fails the step
// at run time if the value is wrong (never skips it in silence).
func (d *decoder) checkTypes() {
	var tc *engine.TypeChecker
	for _, s := range d.steps {
		if (s.step.If == nil || s.ifNode == nil) && (s.step.ForEach == nil || s.forEachNode == nil) {
			continue
		}
		if tc == nil {
			tc = engine.NewTypeChecker(d.declaredTypes())
		}
		if e := s.step.If; e != nil && s.ifNode != nil {
			if t := tc.ResultType(e); t != nil && t.Kind() != reflect.Bool {
				d.at(s.ifNode.pos, "%s: if: the condition gives %s, not a boolean; compare it, e.g. %s", s.label, typeWords(t), comparison(t, e.Source))
			}
		}
		if e := s.step.ForEach; e != nil && s.forEachNode != nil {
			if t := tc.ResultType(e); t != nil && t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
				d.at(s.forEachNode.pos, "%s: for-each: want a list, the expression gives %s", s.label, typeWords(t))
			}
		}
	}
}

func (d *decoder) declaredTypes() engine.Types {
	t := engine.Types{Inputs: map[string]string{}, Steps: map[string]bool{}}
	for name, in := range d.inputs {
		t.Inputs[name] = in.Type
	}
	for _, s := range d.steps {
		if s.step.ID != "" {
			t.Steps[s.step.ID] = s.forEach
		}
	}
	return t
}

// typeWords names a Go type in the words of the file.
func typeWords(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	}
	return "a " + t.String()
}

// comparison suggests a condition made of src, for the error about a
// condition that is not a boolean.
func comparison(t reflect.Type, src string) string {
	switch typeWords(t) {
	case "a string":
		return src + ` == "yes"`
	case "a number":
		return "(" + src + ") > 0"
	case "a list", "a mapping":
		return "len(" + src + ") > 0"
	}
	return src + " != nil"
}
