package transcript

import (
	"reflect"
	"testing"

	"github.com/acpflow/acpflow/decisions"
)

// TestEveryFieldOfARecordIsInTheFormat covers a field added to
// decisions.Permission (or decisions.ToolLocation) and not to the
// format: it would be lost on export without a word. Every field is set,
// and must come back from the format's record.
func TestEveryFieldOfARecordIsInTheFormat(t *testing.T) {
	var p decisions.Permission
	fill(t, reflect.ValueOf(&p).Elem())
	r := recordOf(p)
	if got := r.record(); !reflect.DeepEqual(got, p) {
		t.Errorf("a record through the format:\n%+v\nwant\n%+v\n(a field of decisions.Permission the format does not carry: add it to permissionRecord, and a new Format if readers must know)", got, p)
	}
}

// fill sets every field of v to a value that is not its zero.
func fill(t *testing.T, v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("x-" + v.Type().Name())
	case reflect.Int, reflect.Int64:
		v.SetInt(7)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(t, v.Index(0))
	case reflect.Struct:
		for i := range v.NumField() {
			fill(t, v.Field(i))
		}
	default:
		t.Fatalf("fill: a field of kind %s: teach fill to set it", v.Kind())
	}
}
