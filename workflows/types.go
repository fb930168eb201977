package workflows

import (
	"errors"
	"reflect"
	"strings"

	"github.com/expr-lang/expr/file"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/steps"
)

// checkTypes refuses an `if:` that cannot give a boolean, a for-each
// that cannot give a list, and either when the declared types make it
// wrong (`steps.x.json.approved == "yes"` where x's output schema declares
// approved a boolean), from the types the file declares: inputs, which
// steps are for-each ones, and what each step's output schema says of its
// json. It runs after checkRefs, so that an expression naming something
// unknown is reported once, there, and after prepare, which compiles the
// schemas.
//
// # Notes
//
// Only what is certain is refused: an expression whose type depends on
// the run (a json no schema types, an item) passes, and the engine fails
// the step at run time if the value is wrong (never skips it in silence).
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
			t, err := tc.Check(e)
			switch {
			case err != nil:
				d.typeError(s.ifNode, s.label+": if", e, err)
			case t != nil && t.Kind() != reflect.Bool:
				d.at(s.ifNode.pos, "%s: if: the condition gives %s, not a boolean; compare it, e.g. %s", s.label, typeWords(t), comparison(t, e.Source))
			}
		}
		if e := s.step.ForEach; e != nil && s.forEachNode != nil {
			t, err := tc.Check(e)
			switch {
			case err != nil:
				d.typeError(s.forEachNode, s.label+": for-each", e, err)
			case t != nil && t.Kind() != reflect.Slice && t.Kind() != reflect.Array:
				d.at(s.forEachNode.pos, "%s: for-each: want a list, the expression gives %s", s.label, typeWords(t))
			}
		}
	}
}

// typeError reports an expression the declared types make wrong, at the
// operator or name expr points to.
func (d *decoder) typeError(n *node, what string, e *engine.Expr, err error) {
	at := n.pos
	var fe *file.Error
	if errors.As(err, &fe) {
		at = d.find(n, e.Source, fe.From)
	}
	msg := exprMessage(err)
	if name, ok := strings.CutPrefix(msg, "unknown field "); ok {
		// Every map but a closed json object takes any key here.
		d.at(at, "%s: unknown field %s: the output schema allows no property %q (additionalProperties: false)", what, name, name)
		return
	}
	d.at(at, "%s: %s (by the types the workflow declares)", what, msg)
}

func (d *decoder) declaredTypes() engine.Types {
	t := engine.Types{Inputs: map[string]string{}, Steps: map[string]bool{}, JSON: map[string]*steps.Shape{}}
	for name, in := range d.inputs {
		t.Inputs[name] = in.Type
	}
	for _, s := range d.steps {
		if s.step.ID == "" {
			continue
		}
		t.Steps[s.step.ID] = s.forEach
		if ss, ok := s.step.Run.(steps.StructuredStep); ok {
			if sh := ss.JSONShape(); sh != nil {
				t.JSON[s.step.ID] = sh
			}
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
