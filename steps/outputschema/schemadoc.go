package outputschema

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// An output schema is compiled in two parts (DESIGN.md, "Structured
// output"). github.com/google/jsonschema-go resolves it and decides whether
// an answer matches. What that library leaves out is done here, on the same
// document: each keyword's value is checked as the meta-schema says (the
// library checks structure, regular expressions and references only), every
// fault is placed on its keyword, $ref cycles that never move into the answer
// are refused, and the work one value can cost is bounded.

// Bounds of checking a schema and an answer against it.
const (
	// maxValueChecks bounds the schemas a compiled schema applies to one
	// value through allOf, anyOf, oneOf, not, if and $ref: past it a
	// schema multiplies its own work (a chain of allOf: [a, a]).
	maxValueChecks = 10_000
	// maxAnswerChecks and maxAnswerDepth bound the schema applications one
	// answer costs, and how deep they nest: a recursive schema applied
	// twice per level doubles with every level of the answer.
	maxAnswerChecks = 1_000_000
	maxAnswerDepth  = 10_000
	// maxFound bounds the problems an answer's walk records.
	maxFound = 1_000
)

// draft is the JSON Schema draft a schema is read by.
type draft int

const (
	draft2020 draft = iota
	draft7
)

// The $schema values the library reads; it refuses any other.
const (
	schemaURI2020 = "https://json-schema.org/draft/2020-12/schema"
	schemaURI07   = "http://json-schema.org/draft-07/schema#"
)

func (d draft) String() string {
	if d == draft7 {
		return "draft-07"
	}
	return "draft 2020-12"
}

// draftNamed reads a $schema value: a draft's meta-schema URI over http or
// https, with or without its empty fragment.
func draftNamed(uri string) (draft, bool) {
	rest, ok := strings.CutPrefix(uri, "https://")
	if !ok {
		rest, ok = strings.CutPrefix(uri, "http://")
	}
	switch strings.TrimSuffix(rest, "#") {
	case "json-schema.org/draft/2020-12/schema":
		return draft2020, ok
	case "json-schema.org/draft-07/schema":
		return draft7, ok
	}
	return 0, false
}

// draftOf is the draft a schema document says it is: its root's $schema,
// else 2020-12.
func draftOf(doc any) (draft, *schemaFault) {
	m, _ := doc.(map[string]any)
	v, ok := m["$schema"]
	if !ok {
		return draft2020, nil
	}
	uri, ok := v.(string)
	if !ok {
		return 0, wrongType(v, []string{"$schema"}, "string")
	}
	d, ok := draftNamed(uri)
	if !ok {
		return 0, noSuchDraft(uri, []string{"$schema"})
	}
	return d, nil
}

func noSuchDraft(uri string, at []string) *schemaFault {
	return faultf(at, "$schema %s names no draft acpflow checks: leave it out for draft 2020-12, or name %s or %s", quoted(uri), schemaURI2020, schemaURI07)
}

// schemaFault is what is wrong with a schema: the JSON Pointer tokens of
// the value at fault, and what. unusable is for a valid JSON Schema that
// acpflow refuses to check answers by.
type schemaFault struct {
	at       []string
	msg      string
	unusable bool
}

func faultf(at []string, format string, args ...any) *schemaFault {
	return &schemaFault{at: at, msg: fmt.Sprintf(format, args...)}
}

func unusablef(at []string, format string, args ...any) *schemaFault {
	return &schemaFault{at: at, msg: fmt.Sprintf(format, args...), unusable: true}
}

// child is at with more tokens, in a slice of its own: faults keep theirs.
func child(at []string, tokens ...string) []string {
	return slices.Concat(at, tokens)
}

// The escapes of a JSON Pointer's tokens.
var (
	pointerEscape   = strings.NewReplacer("~", "~0", "/", "~1")
	pointerUnescape = strings.NewReplacer("~1", "/", "~0", "~")
)

// pointer is tokens as a JSON Pointer.
func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(pointerEscape.Replace(t))
	}
	return b.String()
}

// quoted is s in single quotes, as JSON Schema messages quote names and
// places: at '/approved', property 'extra'.
func quoted(s string) string {
	q := strconv.Quote(s)
	q = strings.ReplaceAll(q[1:len(q)-1], `\"`, `"`)
	return "'" + strings.ReplaceAll(q, `'`, `\'`) + "'"
}

func quotedList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = quoted(n)
	}
	return strings.Join(q, ", ")
}

// keyword is the kind of value a keyword of the two drafts takes, as the
// meta-schemas say.
type keyword int

const (
	kwSchema       keyword = iota // a schema: an object or a boolean
	kwSchemaList                  // a non-empty array of schemas
	kwSchemaMap                   // an object of schemas
	kwPatternMap                  // an object of schemas named by regular expressions
	kwItems                       // a schema; under draft-07 also a non-empty array of schemas
	kwDependencies                // an object of schemas or arrays of property names
	kwType                        // a type name, or a non-empty array of distinct ones
	kwDraft                       // $schema
	kwString
	kwURIRef  // a URI reference
	kwAnchor  // a plain name
	kwPattern // a regular expression
	kwCount   // a whole number from 0
	kwNumber
	kwDivisor // a number above 0
	kwBool
	kwNames    // an array of distinct strings
	kwNamesMap // an object of such arrays
	kwValues   // an array of any values (enum, examples)
	kwValue    // any value (const)
	kwAny      // any value the library keeps as JSON text (default)
	kwBoolMap  // $vocabulary
)

// keywords are the keywords the library reads, of both drafts: it reads
// each whatever the draft, so each is checked whatever the draft. Other
// keys are annotations, as both drafts say.
var keywords = map[string]keyword{
	"$id": kwURIRef, "$schema": kwDraft, "$ref": kwURIRef, "$comment": kwString,
	"$defs": kwSchemaMap, "definitions": kwSchemaMap, "$anchor": kwAnchor,
	"$dynamicAnchor": kwAnchor, "$dynamicRef": kwURIRef, "$vocabulary": kwBoolMap,
	"title": kwString, "description": kwString, "default": kwAny, "deprecated": kwBool,
	"readOnly": kwBool, "writeOnly": kwBool, "examples": kwValues,
	"type": kwType, "enum": kwValues, "const": kwValue,
	"multipleOf": kwDivisor, "minimum": kwNumber, "maximum": kwNumber,
	"exclusiveMinimum": kwNumber, "exclusiveMaximum": kwNumber,
	"minLength": kwCount, "maxLength": kwCount, "pattern": kwPattern,
	"prefixItems": kwSchemaList, "items": kwItems, "minItems": kwCount, "maxItems": kwCount,
	"additionalItems": kwSchema, "uniqueItems": kwBool, "contains": kwSchema,
	"minContains": kwCount, "maxContains": kwCount, "unevaluatedItems": kwSchema,
	"minProperties": kwCount, "maxProperties": kwCount, "required": kwNames,
	"dependentRequired": kwNamesMap, "properties": kwSchemaMap, "patternProperties": kwPatternMap,
	"additionalProperties": kwSchema, "propertyNames": kwSchema, "unevaluatedProperties": kwSchema,
	"allOf": kwSchemaList, "anyOf": kwSchemaList, "oneOf": kwSchemaList, "not": kwSchema,
	"if": kwSchema, "then": kwSchema, "else": kwSchema, "dependentSchemas": kwSchemaMap,
	"dependencies": kwDependencies, "contentEncoding": kwString, "contentMediaType": kwString,
	"contentSchema": kwSchema, "format": kwString,
}

var typeNames = []string{"array", "boolean", "integer", "null", "number", "object", "string"}

// anchorName is what $anchor and $dynamicAnchor may hold.
var anchorName = regexp.MustCompile(`^[A-Za-z_][-A-Za-z0-9._]*$`)

// checkKeywords checks a schema document (decoded with UseNumber) as the
// draft's meta-schema would, in key order, and returns its first fault.
func checkKeywords(v any, d draft, at []string) *schemaFault {
	switch s := v.(type) {
	case bool:
		return nil
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(s)) {
			kind, known := keywords[k]
			if !known {
				continue
			}
			if f := checkKeyword(kind, s[k], d, child(at, k)); f != nil {
				return f
			}
		}
		return nil
	}
	return wrongType(v, at, "object or boolean")
}

func checkKeyword(kind keyword, v any, d draft, at []string) *schemaFault {
	switch kind {
	case kwSchema:
		return checkKeywords(v, d, at)
	case kwSchemaList:
		return checkSchemaList(v, d, at)
	case kwItems:
		if _, list := v.([]any); list && d == draft7 {
			return checkSchemaList(v, d, at)
		} else if list {
			return faultf(at, "got array, want object or boolean (under draft 2020-12 a list of item schemas is prefixItems)")
		}
		return checkKeywords(v, d, at)
	case kwSchemaMap, kwPatternMap, kwDependencies, kwNamesMap, kwBoolMap:
		return checkKeywordMap(kind, v, d, at)
	case kwType:
		return checkType(v, at)
	case kwDraft:
		uri, ok := v.(string)
		if !ok {
			return wrongType(v, at, "string")
		}
		named, ok := draftNamed(uri)
		if !ok {
			return noSuchDraft(uri, at)
		}
		if named != d {
			return faultf(at, "$schema names %s here and %s at the root: a schema is checked by one draft", named, d)
		}
	case kwString, kwURIRef, kwAnchor, kwPattern:
		return checkKeywordString(kind, v, at)
	case kwCount:
		if !isCount(v) {
			return faultf(at, "got %s, want a whole number from 0 to %d", describeJSON(v), math.MaxInt32)
		}
	case kwNumber, kwDivisor:
		n, ok := v.(json.Number)
		if !ok {
			return wrongType(v, at, "number")
		}
		f, err := n.Float64()
		if err != nil {
			return faultf(at, "%s is out of range", n)
		}
		if kind == kwDivisor && f <= 0 {
			return faultf(at, "got %s, want a number above 0", n)
		}
	case kwBool:
		if _, ok := v.(bool); !ok {
			return wrongType(v, at, "boolean")
		}
	case kwNames:
		return checkNames(v, at)
	case kwValues:
		if _, ok := v.([]any); !ok {
			return wrongType(v, at, "array")
		}
		return checkNumbers(v, at)
	case kwValue:
		return checkNumbers(v, at)
	}
	return nil
}

// checkKeywordMap checks a keyword whose value is an object of schemas,
// regular expressions to schemas, dependencies, name lists or booleans, key by
// key in sorted order so the first fault reported is always the same one.
func checkKeywordMap(kind keyword, v any, d draft, at []string) *schemaFault {
	m, ok := v.(map[string]any)
	if !ok {
		return wrongType(v, at, "object")
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		at := child(at, k)
		var f *schemaFault
		switch kind {
		case kwPatternMap:
			if _, err := regexp.Compile(k); err != nil {
				return faultf(at, "%s is not a regular expression: %v", quoted(k), err)
			}
			f = checkKeywords(m[k], d, at)
		case kwDependencies:
			if _, names := m[k].([]any); names {
				f = checkNames(m[k], at)
			} else {
				f = checkKeywords(m[k], d, at)
			}
		case kwNamesMap:
			f = checkNames(m[k], at)
		case kwBoolMap:
			if _, ok := m[k].(bool); !ok {
				f = wrongType(m[k], at, "boolean")
			}
		default:
			f = checkKeywords(m[k], d, at)
		}
		if f != nil {
			return f
		}
	}
	return nil
}

// checkKeywordString checks a keyword whose value is a string and, for a URI
// reference, an anchor or a pattern, that the string is one.
func checkKeywordString(kind keyword, v any, at []string) *schemaFault {
	s, ok := v.(string)
	if !ok {
		return wrongType(v, at, "string")
	}
	switch kind {
	case kwURIRef:
		if _, err := url.Parse(s); err != nil {
			return faultf(at, "%s is not a URI reference: %v", quoted(s), errors.Unwrap(err))
		}
	case kwAnchor:
		if !anchorName.MatchString(s) {
			return faultf(at, "%s is not an anchor name: a letter or _, then letters, digits, -, _ and .", quoted(s))
		}
	case kwPattern:
		if _, err := regexp.Compile(s); err != nil {
			return faultf(at, "%s is not a regular expression: %v", quoted(s), err)
		}
	}
	return nil
}

func checkSchemaList(v any, d draft, at []string) *schemaFault {
	l, ok := v.([]any)
	if !ok {
		return wrongType(v, at, "array")
	}
	if len(l) == 0 {
		return faultf(at, "got an empty array, want at least one schema")
	}
	for i, s := range l {
		if f := checkKeywords(s, d, child(at, strconv.Itoa(i))); f != nil {
			return f
		}
	}
	return nil
}

// checkType checks a type keyword; its message for an unknown name lists
// the names.
func checkType(v any, at []string) *schemaFault {
	unknown := func(at []string) *schemaFault {
		return faultf(at, "value must be one of %s", quotedList(typeNames))
	}
	switch t := v.(type) {
	case string:
		if !slices.Contains(typeNames, t) {
			return unknown(at)
		}
		return nil
	case []any:
		if len(t) == 0 {
			return faultf(at, "got an empty array, want at least one type")
		}
		for i, name := range t {
			if s, ok := name.(string); !ok || !slices.Contains(typeNames, s) {
				return unknown(child(at, strconv.Itoa(i)))
			}
			if j := slices.Index(t[:i], name); j >= 0 {
				return faultf(at, "items at %d and %d are equal", j, i)
			}
		}
		return nil
	}
	return wrongType(v, at, "string or array")
}

// checkNames checks an array of distinct strings (required: and the like).
func checkNames(v any, at []string) *schemaFault {
	l, ok := v.([]any)
	if !ok {
		return wrongType(v, at, "array")
	}
	for i, name := range l {
		if _, ok := name.(string); !ok {
			return wrongType(name, child(at, strconv.Itoa(i)), "string")
		}
		if j := slices.Index(l[:i], name); j >= 0 {
			return faultf(at, "items at %d and %d are equal", j, i)
		}
	}
	return nil
}

// checkNumbers refuses a number in a value (enum, const) that a float64
// cannot hold: the library reads them so, and an answer's numbers too.
func checkNumbers(v any, at []string) *schemaFault {
	switch x := v.(type) {
	case json.Number:
		if _, err := x.Float64(); err != nil {
			return faultf(at, "%s is out of range", x)
		}
	case []any:
		for i, e := range x {
			if f := checkNumbers(e, child(at, strconv.Itoa(i))); f != nil {
				return f
			}
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if f := checkNumbers(x[k], child(at, k)); f != nil {
				return f
			}
		}
	}
	return nil
}

// isCount reports whether v is a whole number from 0 to MaxInt32 in a form
// the library reads: digits, or a decimal fraction of zero (3.0).
func isCount(v any) bool {
	n, ok := v.(json.Number)
	if !ok {
		return false
	}
	if !strings.Contains(n.String(), ".") {
		i, err := strconv.ParseInt(n.String(), 10, 64)
		return err == nil && i >= 0 && i <= math.MaxInt32
	}
	f, err := n.Float64()
	return err == nil && f == math.Trunc(f) && f >= 0 && f <= math.MaxInt32
}

func wrongType(v any, at []string, want string) *schemaFault {
	return faultf(at, "got %s, want %s", jsonTypeOf(v), want)
}

// jsonTypeOf names the JSON type of a decoded value.
func jsonTypeOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number, float64:
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// describeJSON is a scalar as written, else its type.
func describeJSON(v any) string {
	switch x := v.(type) {
	case json.Number:
		return x.String()
	case string:
		return quoted(x)
	}
	return jsonTypeOf(v)
}

// schemaDoc is a compiled output schema: the library's resolved form, which
// decides whether an answer matches, and acpflow's index of the same tree,
// which walks an answer to say what is wrong (answerWalk) and types its
// value (shapeOf).
type schemaDoc struct {
	draft    draft
	root     *jsonschema.Schema
	resolved *jsonschema.Resolved
	at       map[*jsonschema.Schema]*schemaNode
	order    []*jsonschema.Schema            // every schema, in document order
	ids      map[string]*jsonschema.Schema   // resources by URI (no fragment)
	dynamic  map[string][]*jsonschema.Schema // schemas by their $dynamicAnchor
}

// schemaNode is what the index knows of one schema of the tree.
type schemaNode struct {
	path []string           // JSON Pointer tokens from the root
	base *jsonschema.Schema // the resource it is in: the root, or the nearest $id
	// uri and anchors are a resource's.
	uri     *url.URL
	anchors map[string]anchor
	// ref is $ref's schema; dynRef $dynamicRef's when it acts as $ref,
	// else dynAnchor is the dynamic anchor it looks up in scope.
	ref       *jsonschema.Schema
	dynRef    *jsonschema.Schema
	dynAnchor string
	pattern   *regexp.Regexp
	patterns  []namedPattern // patternProperties, in key order
	never     bool           // the schema false: no value matches
}

type anchor struct {
	schema  *jsonschema.Schema
	dynamic bool
}

type namedPattern struct {
	re     *regexp.Regexp
	schema *jsonschema.Schema
}

// subschemaField is a keyword that holds schemas: one, a list or an object
// of them (items holds one or, under draft-07, a list).
type subschemaField struct {
	keyword string
	one     func(*jsonschema.Schema) *jsonschema.Schema
	list    func(*jsonschema.Schema) []*jsonschema.Schema
	named   func(*jsonschema.Schema) map[string]*jsonschema.Schema
}

// subschemaFields are the library's schema-valued fields, in keyword order.
var subschemaFields = []subschemaField{
	{keyword: "$defs", named: func(s *jsonschema.Schema) map[string]*jsonschema.Schema { return s.Defs }},
	{keyword: "additionalItems", one: func(s *jsonschema.Schema) *jsonschema.Schema { return s.AdditionalItems }},
	{keyword: "additionalProperties", one: func(s *jsonschema.Schema) *jsonschema.Schema { return s.AdditionalProperties }},
	{keyword: "allOf", list: func(s *jsonschema.Schema) []*jsonschema.Schema { return s.AllOf }},
	{keyword: "anyOf", list: func(s *jsonschema.Schema) []*jsonschema.Schema { return s.AnyOf }},
	{keyword: "contains", one: func(s *jsonschema.Schema) *jsonschema.Schema { return s.Contains }},
	{keyword: "contentSchema", one: func(s *jsonschema.Schema) *jsonschema.Schema { return s.ContentSchema }},
	{keyword: "definitions", named: func(s *jsonschema.Schema) map[string]*jsonschema.Schema { return s.Definitions }},
	{keyword: "dependencies", named: func(s *jsonschema.Schema) map[string]*jsonschema.Schema { return s.DependencySchemas }},
	{keyword: "dependentSchemas", named: func(s *jsonschema.Schema) map[string]*jsonschema.Schema { return s.DependentSchemas }},
	{keyword: "else", one: func(s *jsonschema.Schema) *jsonschema.Schema { return s.Else }},
	{keyword: "if", one: func(s *jsonschema.Schema) *jsonschema.Schema { return s.If }},
	{keyword: "items", one: func(s *jsonschema.Schema) *jsonschema.Schema { return s.Items },
		list: func(s *jsonschema.Schema) []*jsonschema.Schema { return s.ItemsArray }},
	{keyword: "not", one: func(s *jsonschema.Schema) *jsonschema.Schema { return s.Not }},
	{keyword: "oneOf", list: func(s *jsonschema.Schema) []*jsonschema.Schema { return s.OneOf }},
	{keyword: "patternProperties", named: func(s *jsonschema.Schema) map[string]*jsonschema.Schema { return s.PatternProperties }},
	{keyword: "prefixItems", list: func(s *jsonschema.Schema) []*jsonschema.Schema { return s.PrefixItems }},
	{keyword: "properties", named: func(s *jsonschema.Schema) map[string]*jsonschema.Schema { return s.Properties }},
	{keyword: "propertyNames", one: func(s *jsonschema.Schema) *jsonschema.Schema { return s.PropertyNames }},
	{keyword: "then", one: func(s *jsonschema.Schema) *jsonschema.Schema { return s.Then }},
	{keyword: "unevaluatedItems", one: func(s *jsonschema.Schema) *jsonschema.Schema { return s.UnevaluatedItems }},
	{keyword: "unevaluatedProperties", one: func(s *jsonschema.Schema) *jsonschema.Schema { return s.UnevaluatedProperties }},
}

// eachSubschema calls f with each schema directly in s and its tokens
// from s (keyword, then index or name), in keyword then key order.
func eachSubschema(s *jsonschema.Schema, f func(tokens []string, c *jsonschema.Schema)) {
	for _, field := range subschemaFields {
		if field.one != nil {
			if c := field.one(s); c != nil {
				f([]string{field.keyword}, c)
			}
		}
		if field.list != nil {
			for i, c := range field.list(s) {
				f([]string{field.keyword, strconv.Itoa(i)}, c)
			}
		}
		if field.named != nil {
			m := field.named(s)
			for _, k := range slices.Sorted(maps.Keys(m)) {
				f([]string{field.keyword, k}, m[k])
			}
		}
	}
}

// newSchemaDoc compiles a schema document: doc is it decoded with UseNumber
// (for checkKeywords), src its JSON text, base the URI it is read from.
func newSchemaDoc(doc any, src []byte, base *url.URL) (*schemaDoc, *schemaFault) {
	draft, f := draftOf(doc)
	if f != nil {
		return nil, f
	}
	d := &schemaDoc{
		draft:   draft,
		at:      map[*jsonschema.Schema]*schemaNode{},
		ids:     map[string]*jsonschema.Schema{},
		dynamic: map[string][]*jsonschema.Schema{},
	}
	if f := checkKeywords(doc, d.draft, nil); f != nil {
		return nil, f
	}
	d.root = new(jsonschema.Schema)
	if err := json.Unmarshal(src, d.root); err != nil {
		return nil, faultf(nil, "%v", err)
	}
	d.at[d.root] = &schemaNode{uri: base, base: d.root}
	d.ids[base.String()] = d.root
	if f := d.index(d.root, d.root, nil); f != nil {
		return nil, f
	}
	for _, s := range d.order {
		if f := d.resolveRefs(s); f != nil {
			return nil, f
		}
	}
	reach := d.reachable()
	if f := d.cycle(reach); f != nil {
		return nil, f
	}
	if f := d.expansion(reach); f != nil {
		return nil, f
	}
	resolved, err := resolveSchema(d.root, base)
	if err != nil {
		return nil, faultf(nil, "%s", strings.ReplaceAll(err.Error(), base.String(), ""))
	}
	d.resolved = resolved
	return d, nil
}

// resolveSchema is the library's Resolve, with a loader that loads nothing
// (newSchemaDoc refuses a $ref to another document first, placed on it).
// Its asserts panic on states the index rules out; one that does anyway
// is an error, not a crash of the run.
func resolveSchema(root *jsonschema.Schema, base *url.URL) (rs *jsonschema.Resolved, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the JSON Schema library failed on it: %v", r)
		}
	}()
	return root.Resolve(&jsonschema.ResolveOptions{
		BaseURI: base.String(),
		Loader: func(uri *url.URL) (*jsonschema.Schema, error) {
			return nil, errors.New(noOtherDocuments)
		},
	})
}

const noOtherDocuments = "acpflow loads no other schema documents: put the definitions under $defs and refer to them as #/$defs/NAME"

// index records every schema's place, resource and anchors, as the library
// resolves them: an $id starts a resource (under draft-07 only without a
// $ref beside it, and #name is an anchor); $anchor and $dynamicAnchor
// name a schema in its resource under 2020-12.
func (d *schemaDoc) index(s, base *jsonschema.Schema, path []string) *schemaFault {
	n := d.at[s]
	if n == nil {
		n = &schemaNode{}
		d.at[s] = n
	}
	n.path, n.never = path, isFalse(s)
	d.order = append(d.order, s)
	if s.Schema != "" {
		// checkKeywords made it name d.draft; the library knows one spelling.
		s.Schema = map[draft]string{draft2020: schemaURI2020, draft7: schemaURI07}[d.draft]
	}
	base, fault := d.indexID(s, base, path)
	if fault != nil {
		return fault
	}
	n.base = base
	if d.draft == draft2020 {
		for _, a := range []struct {
			name, keyword string
			dynamic       bool
		}{{s.Anchor, "$anchor", false}, {s.DynamicAnchor, "$dynamicAnchor", true}} {
			if a.name != "" {
				if f := d.setAnchor(s, base, path, a.name, a.dynamic, a.keyword); f != nil {
					return f
				}
			}
		}
	}
	var err error
	if s.Pattern != "" {
		if n.pattern, err = regexp.Compile(s.Pattern); err != nil {
			return faultf(child(path, "pattern"), "%s is not a regular expression: %v", quoted(s.Pattern), err)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.PatternProperties)) {
		re, err := regexp.Compile(k)
		if err != nil {
			return faultf(child(path, "patternProperties", k), "%s is not a regular expression: %v", quoted(k), err)
		}
		n.patterns = append(n.patterns, namedPattern{re, s.PatternProperties[k]})
	}
	eachSubschema(s, func(tokens []string, c *jsonschema.Schema) {
		if fault == nil {
			fault = d.index(c, base, child(path, tokens...))
		}
	})
	return fault
}

// indexID handles a schema's $id: under draft-07 a #name is an anchor;
// otherwise it must resolve to an absolute URI no other schema has, and the
// schema starts a resource, the base its subschemas are indexed against.
func (d *schemaDoc) indexID(s, base *jsonschema.Schema, path []string) (*jsonschema.Schema, *schemaFault) {
	if s.ID != "" && !(d.draft == draft7 && s.Ref != "") {
		id, err := url.Parse(s.ID)
		if err != nil {
			return base, faultf(child(path, "$id"), "%s is not a URI reference", quoted(s.ID))
		}
		switch {
		case id.Fragment != "" && d.draft == draft7:
			if f := d.setAnchor(s, base, path, strings.TrimPrefix(s.ID, "#"), false, "$id"); f != nil {
				return base, f
			}
		case id.Fragment != "":
			return base, faultf(child(path, "$id"), "$id %s has a fragment: name a schema with $anchor", quoted(s.ID))
		default:
			uri := d.at[base].uri.ResolveReference(id)
			if !uri.IsAbs() {
				return base, faultf(child(path, "$id"), "$id %s is not an absolute URI", quoted(s.ID))
			}
			if other, dup := d.ids[uri.String()]; dup && other != s && other != d.root {
				return base, faultf(child(path, "$id"), "$id %s is also %s", quoted(s.ID), d.describe(other))
			}
			d.ids[uri.String()] = s
			d.at[s].uri, base = uri, s
		}
	}
	return base, nil
}

// setAnchor names schema s in base's resource, once per resource; a dynamic
// anchor is also one $dynamicRef may land on.
func (d *schemaDoc) setAnchor(s, base *jsonschema.Schema, path []string, name string, dynamic bool, keyword string) *schemaFault {
	b := d.at[base]
	if _, dup := b.anchors[name]; dup {
		return faultf(child(path, keyword), "anchor %s is defined twice in %s", quoted(name), d.describe(base))
	}
	if b.anchors == nil {
		b.anchors = map[string]anchor{}
	}
	b.anchors[name] = anchor{s, dynamic}
	if dynamic {
		d.dynamic[name] = append(d.dynamic[name], s)
	}
	return nil
}

// describe names a schema in a message: its JSON Pointer from the root.
func (d *schemaDoc) describe(s *jsonschema.Schema) string {
	return "#" + pointer(d.at[s].path)
}

// resolveRefs finds the schemas s's $ref and $dynamicRef name, in this
// document only.
func (d *schemaDoc) resolveRefs(s *jsonschema.Schema) *schemaFault {
	n := d.at[s]
	if s.Ref != "" {
		t, _, f := d.lookup(s, s.Ref, "$ref")
		if f != nil {
			return f
		}
		n.ref = t
	}
	if s.DynamicRef != "" {
		t, dynamic, f := d.lookup(s, s.DynamicRef, "$dynamicRef")
		if f != nil {
			return f
		}
		if dynamic != "" {
			n.dynAnchor = dynamic
		} else {
			n.dynRef = t
		}
	}
	return nil
}

// lookup resolves ref against s's resource: a resource of this document by
// URI, then its fragment as a JSON Pointer or an anchor. dynamic is the
// anchor's name when the fragment names a $dynamicAnchor.
func (d *schemaDoc) lookup(s *jsonschema.Schema, ref, keyword string) (_ *jsonschema.Schema, dynamic string, _ *schemaFault) {
	at := child(d.at[s].path, keyword)
	u, err := url.Parse(ref)
	if err != nil {
		return nil, "", faultf(at, "%s is not a URI reference", quoted(ref))
	}
	u = d.at[d.at[s].base].uri.ResolveReference(u)
	frag := u.Fragment
	u.Fragment, u.RawFragment = "", ""
	res := d.ids[u.String()]
	if res == nil {
		where := u.String()
		if u.Scheme == "file" {
			where = u.Path
		}
		return nil, "", unusablef(at, "%s %s: %s", keyword, where, noOtherDocuments)
	}
	if frag != "" && !strings.HasPrefix(frag, "/") {
		a, ok := d.at[res].anchors[frag]
		if !ok {
			return nil, "", faultf(at, "%s %s: no anchor %s in %s", keyword, quoted(ref), quoted(frag), d.describe(res))
		}
		if a.dynamic {
			dynamic = frag
		}
		return a.schema, dynamic, nil
	}
	t := deref(res, frag)
	if t == nil {
		return nil, "", faultf(at, "%s %s: no schema at %s", keyword, quoted(ref), quoted(frag))
	}
	return t, "", nil
}

// deref follows a JSON Pointer from s through schema-valued keywords; nil
// when it leads to no schema.
func deref(s *jsonschema.Schema, ptr string) *jsonschema.Schema {
	if ptr == "" {
		return s
	}
	tokens := strings.Split(ptr[1:], "/")
	for i := range tokens {
		tokens[i] = pointerUnescape.Replace(tokens[i])
	}
	for len(tokens) > 0 {
		k := slices.IndexFunc(subschemaFields, func(f subschemaField) bool { return f.keyword == tokens[0] })
		if k < 0 {
			return nil
		}
		field := subschemaFields[k]
		tokens = tokens[1:]
		switch {
		case field.one != nil && field.one(s) != nil:
			s = field.one(s)
		case field.list != nil && len(tokens) > 0:
			list := field.list(s)
			i, err := strconv.Atoi(tokens[0])
			if err != nil || i < 0 || i >= len(list) || strconv.Itoa(i) != tokens[0] {
				return nil
			}
			s, tokens = list[i], tokens[1:]
		case field.named != nil && len(tokens) > 0:
			c, ok := field.named(s)[tokens[0]]
			if !ok {
				return nil
			}
			s, tokens = c, tokens[1:]
		default:
			return nil
		}
	}
	return s
}

// step is a move of validation from one schema to another: via names the
// keyword (allOf/0, $ref).
type step struct {
	from *jsonschema.Schema
	via  string
	to   *jsonschema.Schema
}

// inPlace lists what the library applies to the very value s checks, as
// it does: under draft-07 a $ref stands alone; then and else only beside
// if; a $dynamicRef that looks up its scope may reach any schema with its
// dynamic anchor.
func (d *schemaDoc) inPlace(s *jsonschema.Schema) []step {
	n := d.at[s]
	var out []step
	add := func(via string, to *jsonschema.Schema) { out = append(out, step{s, via, to}) }
	if s.Ref != "" {
		add("$ref", n.ref)
		if d.draft == draft7 {
			return out
		}
	}
	if n.dynRef != nil {
		add("$dynamicRef", n.dynRef)
	}
	for _, t := range d.dynamic[n.dynAnchor] {
		add("$dynamicRef", t)
	}
	for _, l := range []struct {
		keyword string
		list    []*jsonschema.Schema
	}{{"allOf", s.AllOf}, {"anyOf", s.AnyOf}, {"oneOf", s.OneOf}} {
		for i, c := range l.list {
			add(l.keyword+"/"+strconv.Itoa(i), c)
		}
	}
	if s.Not != nil {
		add("not", s.Not)
	}
	if s.If != nil {
		add("if", s.If)
		if s.Then != nil {
			add("then", s.Then)
		}
		if s.Else != nil {
			add("else", s.Else)
		}
	}
	dependent, keyword := s.DependentSchemas, "dependentSchemas"
	if d.draft == draft7 {
		dependent, keyword = s.DependencySchemas, "dependencies"
	}
	for _, k := range slices.Sorted(maps.Keys(dependent)) {
		add(keyword+"/"+k, dependent[k])
	}
	return out
}

// parts lists what the library applies to the parts of the value s
// checks: its properties, their names, its items.
func (d *schemaDoc) parts(s *jsonschema.Schema) []*jsonschema.Schema {
	if s.Ref != "" && d.draft == draft7 {
		return nil
	}
	out := []*jsonschema.Schema{s.AdditionalProperties, s.PropertyNames, s.UnevaluatedProperties, s.Contains, s.UnevaluatedItems, s.Items}
	if d.draft == draft7 {
		out = append(append(out, s.AdditionalItems), s.ItemsArray...)
	} else {
		out = append(out, s.PrefixItems...)
	}
	for _, m := range []map[string]*jsonschema.Schema{s.Properties, s.PatternProperties} {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			out = append(out, m[k])
		}
	}
	return slices.DeleteFunc(out, func(c *jsonschema.Schema) bool { return c == nil })
}

// reachable lists the schemas validation can apply, from the root, breadth
// first: what $defs holds and nothing refers to is never applied.
func (d *schemaDoc) reachable() []*jsonschema.Schema {
	seen := map[*jsonschema.Schema]bool{d.root: true}
	out := []*jsonschema.Schema{d.root}
	for i := 0; i < len(out); i++ {
		next := d.parts(out[i])
		for _, st := range d.inPlace(out[i]) {
			next = append(next, st.to)
		}
		for _, c := range next {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	return out
}

// cycle refuses a schema that can apply itself to the same value again
// without end: a cycle of in-place steps ($ref, allOf, not, …) among the
// schemas validation reaches. A recursive schema that comes back to itself
// through properties or items checks a smaller part each time, and ends.
// The fault is on the first $ref of the cycle as it is met from the root.
func (d *schemaDoc) cycle(reach []*jsonschema.Schema) *schemaFault {
	const (
		unseen = iota
		onPath
		done
	)
	state := map[*jsonschema.Schema]int{}
	var path []step
	var visit func(s *jsonschema.Schema) []step
	visit = func(s *jsonschema.Schema) []step {
		state[s] = onPath
		for _, st := range d.inPlace(s) {
			switch state[st.to] {
			case onPath:
				i := slices.IndexFunc(path, func(p step) bool { return p.from == st.to })
				if i < 0 {
					i = len(path)
				}
				return append(slices.Clone(path[i:]), st)
			case unseen:
				path = append(path, st)
				if c := visit(st.to); c != nil {
					return c
				}
				path = path[:len(path)-1]
			}
		}
		state[s] = done
		return nil
	}
	for _, s := range reach {
		if state[s] != unseen {
			continue
		}
		c := visit(s)
		if c == nil {
			continue
		}
		chain := d.describe(c[0].from)
		at := d.at[c[0].from].path
		placed := false
		for _, st := range c {
			chain += " -" + st.via + "-> " + d.describe(st.to)
			if (st.via == "$ref" || st.via == "$dynamicRef") && !placed {
				at, placed = child(d.at[st.from].path, st.via), true
			}
		}
		return unusablef(at, "$ref cycle %s: it applies the same schema to the same value without end; a schema may come back to itself only through properties, items or another keyword that checks a part of the value", chain)
	}
	return nil
}

// expansion refuses a schema that applies more than maxValueChecks schemas
// to one value (allOf: [a, a] in a chain doubles at each link), at the
// first such schema from the root. The in-place steps have no cycle here.
func (d *schemaDoc) expansion(reach []*jsonschema.Schema) *schemaFault {
	count := map[*jsonschema.Schema]int{}
	var size func(s *jsonschema.Schema) int
	size = func(s *jsonschema.Schema) int {
		if n, ok := count[s]; ok {
			return n
		}
		n := 1
		for _, st := range d.inPlace(s) {
			if n += size(st.to); n > maxValueChecks {
				n = maxValueChecks + 1
				break
			}
		}
		count[s] = n
		return n
	}
	for _, s := range reach {
		if size(s) > maxValueChecks {
			return unusablef(d.at[s].path, "checking one value here applies more than %d schemas (allOf, anyOf, oneOf and $ref multiply): it would take too long to check an answer", maxValueChecks)
		}
	}
	return nil
}
