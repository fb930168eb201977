package outputschema

import (
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
)

// answerWalk goes through an answer as the library's Validate does,
// keyword by keyword, but past the first fault: it records every problem
// at its place in the answer (the library says only the first, at its
// place in the schema), in an order of its own (the library's follows Go
// map order). It also bounds the work: it applies no more schemas, and
// nests no deeper, than maxAnswerChecks and maxAnswerDepth, and as it
// applies every schema the library would (it stops at no first fault), an
// answer it finishes the library finishes too.
//
// The library decides; the walk explains (outputSchema.check).
type answerWalk struct {
	doc     *schemaDoc
	found   []answerProblem // at most maxFound
	dropped int             // problems past maxFound
	checks  int
	depth   int
	// scope is the schemas being applied, outermost first: where a
	// $dynamicRef looks for its anchor.
	scope   []*jsonschema.Schema
	tooMuch bool
}

// answerProblem is one thing wrong with an answer: where (JSON Pointer
// tokens) and what.
type answerProblem struct {
	at  []string
	msg string
}

// evaluated is what a schema evaluated of its value, for unevaluatedItems
// and unevaluatedProperties: the library's annotations.
type evaluated struct {
	allItems bool
	endIndex int // items before it were evaluated (prefixItems)
	indexes  map[int]bool
	allProps bool
	props    map[string]bool
}

func (e *evaluated) merge(o evaluated) {
	e.allItems = e.allItems || o.allItems
	e.endIndex = max(e.endIndex, o.endIndex)
	for i := range o.indexes {
		e.noteIndex(i)
	}
	e.allProps = e.allProps || o.allProps
	for p := range o.props {
		e.noteProp(p)
	}
}

func (e *evaluated) noteIndex(i int) {
	if e.indexes == nil {
		e.indexes = map[int]bool{}
	}
	e.indexes[i] = true
}

func (e *evaluated) noteProp(p string) {
	if e.props == nil {
		e.props = map[string]bool{}
	}
	e.props[p] = true
}

// mark is how far the walk has come, to undo what a subschema recorded
// when its result is not a problem (an anyOf branch that another matches).
type mark struct{ found, dropped int }

func (w *answerWalk) mark() mark { return mark{len(w.found), w.dropped} }

func (w *answerWalk) undo(m mark) { w.found, w.dropped = w.found[:m.found], m.dropped }

// failedSince reports whether anything was recorded after m.
func (w *answerWalk) failedSince(m mark) bool { return w.mark() != m }

func (w *answerWalk) report(at []string, format string, args ...any) {
	if len(w.found) >= maxFound {
		w.dropped++
		return
	}
	w.found = append(w.found, answerProblem{at, fmt.Sprintf(format, args...)})
}

// spend counts n checks against the bound.
func (w *answerWalk) spend(n int) bool {
	w.checks += n
	if w.checks > maxAnswerChecks {
		w.tooMuch = true
	}
	return !w.tooMuch
}

// apply checks v, at at in the answer, against s: it records what is wrong
// and returns whether v matches and what s evaluated of it.
func (w *answerWalk) apply(s *jsonschema.Schema, v any, at []string) (ok bool, ev evaluated) {
	if w.tooMuch || !w.spend(1) {
		return true, ev
	}
	w.depth++
	w.scope = append(w.scope, s)
	defer func() {
		w.depth--
		w.scope = w.scope[:len(w.scope)-1]
	}()
	if w.depth > maxAnswerDepth {
		w.tooMuch = true
		return true, ev
	}
	start := w.mark()
	n := w.doc.at[s]
	// inPlace applies c to v itself; what c evaluated counts when v matches it.
	inPlace := func(c *jsonschema.Schema) bool {
		ok, e := w.apply(c, v, at)
		if ok {
			ev.merge(e)
		}
		return ok
	}
	if n.never {
		w.report(at, "no value is allowed here")
		return false, ev
	}

	if s.Ref != "" {
		inPlace(n.ref)
		if w.doc.draft == draft7 {
			// Draft-07 ignores a $ref's siblings, and the library passes
			// nothing it evaluated to the caller.
			return !w.failedSince(start), evaluated{}
		}
	}
	w.checkValue(s, n, v, at)
	w.applyCombinators(s, n, v, at, inPlace)
	switch x := v.(type) {
	case []any:
		w.checkArray(s, x, at, &ev)
	case map[string]any:
		w.checkObject(s, n, x, at, &ev)
	}
	return !w.failedSince(start), ev
}

// checkValue checks v against the keywords that look at the value itself:
// type, enum, const, and the number and string keywords.
func (w *answerWalk) checkValue(s *jsonschema.Schema, n *schemaNode, v any, at []string) {
	if s.Type != "" || s.Types != nil {
		want := s.Types
		if s.Type != "" {
			want = []string{s.Type}
		}
		if !hasType(v, want) {
			w.report(at, "got %s, want %s", jsonTypeOf(v), strings.Join(want, " or "))
		}
	}
	if s.Enum != nil {
		w.spend(len(s.Enum))
		if !slices.ContainsFunc(s.Enum, func(e any) bool { return jsonEqual(e, v) }) {
			w.report(at, "%s", wantOneOf("enum", s.Enum))
		}
	}
	if s.Const != nil && !jsonEqual(*s.Const, v) {
		w.report(at, "%s", wantOneOf("const", []any{*s.Const}))
	}
	if f, isNum := v.(float64); isNum {
		w.checkNumber(s, f, at)
	}
	if str, isStr := v.(string); isStr {
		w.checkString(s, n, str, at)
	}
}

// applyCombinators applies the keywords that apply other schemas to v itself
// ($dynamicRef, allOf, anyOf, oneOf, not, if/then/else) through inPlace,
// keeping what failed only where the keyword says it counts.
func (w *answerWalk) applyCombinators(s *jsonschema.Schema, n *schemaNode, v any, at []string, inPlace func(*jsonschema.Schema) bool) {
	if s.DynamicRef != "" {
		target := n.dynRef
		if target == nil {
			target = w.dynamicTarget(n.dynAnchor)
		}
		if target == nil {
			w.report(at, "missing dynamic anchor %s", quoted(n.dynAnchor))
		} else {
			inPlace(target)
		}
	}
	for _, c := range s.AllOf {
		inPlace(c)
	}
	if s.AnyOf != nil {
		before, matched := w.mark(), false
		for _, c := range s.AnyOf {
			matched = inPlace(c) || matched
		}
		if matched {
			w.undo(before)
		}
	}
	if s.OneOf != nil {
		before := w.mark()
		var matched []int
		for i, c := range s.OneOf {
			if inPlace(c) {
				matched = append(matched, i)
			}
		}
		switch {
		case len(matched) == 1:
			w.undo(before)
		case len(matched) > 1:
			w.undo(before)
			w.report(at, "'oneOf' failed, subschemas %d, %d matched", matched[0], matched[1])
		}
	}
	if s.Not != nil {
		before := w.mark()
		matched, _ := w.apply(s.Not, v, at)
		w.undo(before)
		if matched {
			w.report(at, "'not' failed")
		}
	}
	if s.If != nil {
		before := w.mark()
		branch := s.Else
		if inPlace(s.If) {
			branch = s.Then
		}
		w.undo(before)
		if branch != nil {
			inPlace(branch)
		}
	}
}

// dynamicTarget finds a $dynamicRef's schema as the library does: in the
// outermost resource in scope that has the dynamic anchor.
func (w *answerWalk) dynamicTarget(name string) *jsonschema.Schema {
	for _, s := range w.scope {
		base := w.doc.at[w.doc.at[s].base]
		if a, ok := base.anchors[name]; ok && a.dynamic {
			return a.schema
		}
	}
	return nil
}

func (w *answerWalk) checkNumber(s *jsonschema.Schema, f float64, at []string) {
	if m := s.MultipleOf; m != nil {
		// As the library divides: 0.3 is no multiple of 0.1 in float64.
		if _, frac := math.Modf(f / *m); frac != 0 {
			w.report(at, "multipleOf: got %s, want %s", number(f), number(*m))
		}
	}
	for _, b := range []struct {
		keyword string
		bound   *float64
		fails   func(f, b float64) bool
	}{
		{"minimum", s.Minimum, func(f, b float64) bool { return f < b }},
		{"maximum", s.Maximum, func(f, b float64) bool { return f > b }},
		{"exclusiveMinimum", s.ExclusiveMinimum, func(f, b float64) bool { return f <= b }},
		{"exclusiveMaximum", s.ExclusiveMaximum, func(f, b float64) bool { return f >= b }},
	} {
		if b.bound != nil && b.fails(f, *b.bound) {
			w.report(at, "%s: got %s, want %s", b.keyword, number(f), number(*b.bound))
		}
	}
}

func (w *answerWalk) checkString(s *jsonschema.Schema, n *schemaNode, str string, at []string) {
	length := utf8.RuneCountInString(str)
	if s.MinLength != nil && length < *s.MinLength {
		w.report(at, "minLength: got %d, want %d", length, *s.MinLength)
	}
	if s.MaxLength != nil && length > *s.MaxLength {
		w.report(at, "maxLength: got %d, want %d", length, *s.MaxLength)
	}
	if n.pattern != nil && !n.pattern.MatchString(str) {
		w.report(at, "%s does not match pattern %s", quoted(str), quoted(s.Pattern))
	}
}

func (w *answerWalk) checkArray(s *jsonschema.Schema, items []any, at []string, ev *evaluated) {
	// each applies c to the items from start on; items: false says so once.
	each := func(c *jsonschema.Schema, start int) {
		if w.doc.at[c].never && len(items) > start {
			w.report(at, "got %d items, want at most %d", len(items), start)
			return
		}
		for i := start; i < len(items); i++ {
			w.apply(c, items[i], child(at, strconv.Itoa(i)))
		}
	}
	prefix := s.PrefixItems
	rest := s.Items
	if w.doc.draft == draft7 {
		prefix, rest = s.ItemsArray, nil
		if s.ItemsArray == nil {
			rest = s.Items
		} else if s.AdditionalItems != nil {
			rest = s.AdditionalItems
		}
	}
	for i, c := range prefix {
		if i < len(items) {
			w.apply(c, items[i], child(at, strconv.Itoa(i)))
		}
	}
	ev.endIndex = max(ev.endIndex, min(len(prefix), len(items)))
	if rest != nil {
		each(rest, len(prefix))
		ev.allItems = true
	}
	w.checkContains(s, items, at, ev)
	if m := s.MinItems; m != nil && len(items) < *m {
		w.report(at, "minItems: got %d, want %d", len(items), *m)
	}
	if m := s.MaxItems; m != nil && len(items) > *m {
		w.report(at, "maxItems: got %d, want %d", len(items), *m)
	}
	if s.UniqueItems && len(items) > 1 {
		w.spend(len(items))
		first := map[string]int{}
		for i, item := range items {
			key := canonicalJSON(item)
			if j, dup := first[key]; dup {
				w.report(at, "items at %d and %d are equal", j, i)
				break
			}
			first[key] = i
		}
	}
	w.checkUnevaluatedItems(s, items, at, ev)
}

// checkUnevaluatedItems applies unevaluatedItems to the items no other
// keyword evaluated; after it, every item counts as evaluated.
func (w *answerWalk) checkUnevaluatedItems(s *jsonschema.Schema, items []any, at []string, ev *evaluated) {
	if s.UnevaluatedItems != nil && !ev.allItems {
		var left []int
		for i := ev.endIndex; i < len(items); i++ {
			if !ev.indexes[i] {
				left = append(left, i)
			}
		}
		if w.doc.at[s.UnevaluatedItems].never && len(left) > 0 {
			w.report(at, "unevaluated items at %s not allowed", strings.Trim(fmt.Sprint(left), "[]"))
		} else {
			for _, i := range left {
				w.apply(s.UnevaluatedItems, items[i], child(at, strconv.Itoa(i)))
			}
		}
		ev.allItems = true
	}
}

// checkContains counts the items that match contains (each one evaluated)
// and checks the count against minContains and maxContains.
func (w *answerWalk) checkContains(s *jsonschema.Schema, items []any, at []string, ev *evaluated) {
	contained := 0
	if s.Contains != nil {
		for i, item := range items {
			before := w.mark()
			if ok, _ := w.apply(s.Contains, item, child(at, strconv.Itoa(i))); ok {
				contained++
				ev.noteIndex(i)
			}
			w.undo(before)
		}
		if contained == 0 && (s.MinContains == nil || *s.MinContains > 0) {
			w.report(at, "no items match contains schema")
		}
		if m := s.MinContains; m != nil && contained < *m && contained > 0 {
			w.report(at, "minContains: got %d items that match contains, want %d", contained, *m)
		}
		if m := s.MaxContains; m != nil && contained > *m {
			w.report(at, "maxContains: got %d items that match contains, want %d", contained, *m)
		}
	}
}

func (w *answerWalk) checkObject(s *jsonschema.Schema, n *schemaNode, obj map[string]any, at []string, ev *evaluated) {
	names := slices.Sorted(maps.Keys(obj))
	done := map[string]bool{} // evaluated by this schema's own keywords
	for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
		if val, ok := obj[name]; ok {
			w.apply(s.Properties[name], val, child(at, name))
			done[name] = true
		}
	}
	if len(n.patterns) > 0 {
		for _, name := range names {
			if !w.spend(len(n.patterns)) {
				return
			}
			for _, p := range n.patterns {
				if p.re.MatchString(name) {
					w.apply(p.schema, obj[name], child(at, name))
					done[name] = true
				}
			}
		}
	}
	if ap := s.AdditionalProperties; ap != nil {
		var others []string
		for _, name := range names {
			if !done[name] {
				others = append(others, name)
			}
		}
		if w.doc.at[ap].never && len(others) > 0 {
			w.report(at, "additional properties %s not allowed", quotedList(others))
		} else {
			for _, name := range others {
				w.apply(ap, obj[name], child(at, name))
			}
		}
		for _, name := range others {
			done[name] = true
		}
	}
	for name := range done {
		ev.noteProp(name)
	}
	if s.PropertyNames != nil {
		for _, name := range names {
			before := w.mark()
			if ok, _ := w.apply(s.PropertyNames, name, at); !ok {
				why := ""
				if len(w.found) > before.found {
					why = ": " + w.found[before.found].msg
				}
				w.undo(before)
				w.report(at, "invalid property name %s%s", quoted(name), why)
			}
		}
	}
	if m := s.MinProperties; m != nil && len(obj) < *m {
		w.report(at, "minProperties: got %d, want %d", len(obj), *m)
	}
	if m := s.MaxProperties; m != nil && len(obj) > *m {
		w.report(at, "maxProperties: got %d, want %d", len(obj), *m)
	}
	if missing := missingNames(obj, s.Required); len(missing) == 1 {
		w.report(at, "missing property %s", quoted(missing[0]))
	} else if len(missing) > 1 {
		w.report(at, "missing properties %s", quotedList(missing))
	}
	w.checkDependencies(s, obj, at, ev)
	w.checkUnevaluatedProps(s, names, obj, at, ev)
}

// checkUnevaluatedProps applies unevaluatedProperties to the properties
// (names, sorted) no other keyword evaluated; after it, all count as evaluated.
func (w *answerWalk) checkUnevaluatedProps(s *jsonschema.Schema, names []string, obj map[string]any, at []string, ev *evaluated) {
	if up := s.UnevaluatedProperties; up != nil && !ev.allProps {
		var left []string
		for _, name := range names {
			if !ev.props[name] {
				left = append(left, name)
			}
		}
		if w.doc.at[up].never && len(left) > 0 {
			w.report(at, "unevaluated properties %s not allowed", quotedList(left))
		} else {
			for _, name := range left {
				w.apply(up, obj[name], child(at, name))
			}
		}
		ev.allProps = true
	}
}

// checkDependencies checks the names and schemas a present property requires
// (dependentRequired and dependentSchemas; under draft-07, dependencies).
func (w *answerWalk) checkDependencies(s *jsonschema.Schema, obj map[string]any, at []string, ev *evaluated) {
	requiredBy, schemaBy := s.DependentRequired, s.DependentSchemas
	if w.doc.draft == draft7 {
		requiredBy, schemaBy = s.DependencyStrings, s.DependencySchemas
	}
	for _, name := range slices.Sorted(maps.Keys(requiredBy)) {
		if _, has := obj[name]; has {
			if missing := missingNames(obj, requiredBy[name]); len(missing) > 0 {
				w.report(at, "properties %s required, if %s exists", quotedList(missing), quoted(name))
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(schemaBy)) {
		if _, has := obj[name]; has {
			if ok, e := w.apply(schemaBy[name], obj, at); ok {
				ev.merge(e)
			}
		}
	}
}

func missingNames(obj map[string]any, names []string) []string {
	var missing []string
	for _, name := range names {
		if _, ok := obj[name]; !ok {
			missing = append(missing, name)
		}
	}
	return missing
}

// hasType reports whether v is of one of the types, as the library types
// a float64: integer when it has no fraction, and a number either way.
func hasType(v any, types []string) bool {
	t := jsonTypeOf(v)
	if f, ok := v.(float64); ok && f == math.Trunc(f) && !math.IsInf(f, 0) {
		if slices.Contains(types, "integer") {
			return true
		}
	}
	return slices.Contains(types, t)
}

// isFalse reports whether s is the schema false (the library reads false
// as {"not": {}}).
func isFalse(s *jsonschema.Schema) bool {
	if s == nil || !isTrue(s.Not) {
		return false
	}
	c := *s
	c.Not = nil
	return isTrue(&c)
}

// isTrue reports whether s is the schema true (or {}).
func isTrue(s *jsonschema.Schema) bool {
	return s != nil && reflect.ValueOf(*s).IsZero()
}

// jsonEqual compares two decoded JSON values as the library does.
func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || !jsonEqual(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return a == b
}

// canonicalJSON is a key equal for values jsonEqual calls equal.
func canonicalJSON(v any) string {
	var b strings.Builder
	var write func(v any)
	write = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			b.WriteByte('{')
			for _, k := range slices.Sorted(maps.Keys(x)) {
				b.WriteString(strconv.Quote(k))
				b.WriteByte(':')
				write(x[k])
				b.WriteByte(',')
			}
			b.WriteByte('}')
		case []any:
			b.WriteByte('[')
			for _, e := range x {
				write(e)
				b.WriteByte(',')
			}
			b.WriteByte(']')
		case string:
			b.WriteString(strconv.Quote(x))
		case float64:
			b.WriteString(number(x + 0)) // -0 is 0
		default:
			fmt.Fprint(&b, x)
		}
	}
	write(v)
	return b.String()
}

// wantOneOf says what enum (or const) wants: its values when they are
// scalars.
func wantOneOf(keyword string, values []any) string {
	var want []string
	for _, v := range values {
		switch x := v.(type) {
		case map[string]any, []any:
			if len(values) == 1 {
				return "value must be the value " + keyword + " gives"
			}
			return fmt.Sprintf("value must be one of the %d values %s lists", len(values), keyword)
		case string:
			want = append(want, quoted(x))
		case float64:
			want = append(want, number(x))
		case nil:
			want = append(want, "null")
		default:
			want = append(want, fmt.Sprint(x))
		}
	}
	if len(want) == 1 {
		return "value must be " + want[0]
	}
	return "value must be one of " + strings.Join(want, ", ")
}

func number(f float64) string {
	if f == 0 {
		return "0"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
