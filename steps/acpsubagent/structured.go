package acpsubagent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/acpflow/acpflow/internal/bytesize"
	"github.com/acpflow/acpflow/internal/regularfile"
	"github.com/acpflow/acpflow/steps"
)

// Bounds of structured output (docs/acp-subagent.md#structured-output).
const (
	// maxSchemaFile bounds an output-schema file.
	maxSchemaFile = 1 << 20
	// defaultSchemaRetries is how many follow-up prompts a step without
	// schema-retries: sends; maxSchemaRetries is the most it may ask for.
	defaultSchemaRetries = 1
	maxSchemaRetries     = 10
	// maxSchemaProblems and maxProblemBytes bound the validation errors a
	// follow-up prompt, an event and a step's error carry: they quote the
	// agent's own answer (property names, values).
	maxSchemaProblems = 10
	maxProblemBytes   = 300
	// maxQuotedSchema is the largest schema a follow-up prompt repeats.
	maxQuotedSchema = 4 << 10
	// maxShapeNodes bounds the type a schema gives steps.ID.json in
	// validate: a recursive schema ($ref: "#") has no end of its own.
	maxShapeNodes = 2000
)

// outputSchema is a step's with.output-schema, compiled when the workflow
// is loaded: what the step's final message must be, as JSON.
type outputSchema struct {
	schema *schemaDoc
	// text is the schema as compact JSON, for the follow-up prompt.
	text    string
	shape   *steps.Shape
	retries int // follow-up prompts after a mismatch (schema-retries:)
}

// prepareOutputSchema reads, checks and compiles with.output-schema (a
// mapping, or the path of a JSON file relative to dir, the workflow
// file's directory) and with.schema-retries. It returns nil for a step
// without output-schema. Its errors are *steps.FieldError.
func prepareOutputSchema(with map[string]any, dir string) (*outputSchema, error) {
	raw, ok := with["output-schema"]
	if !ok {
		if _, set := with["schema-retries"]; set {
			return nil, steps.FieldErrorf(withPath("schema-retries"), "with.schema-retries needs with.output-schema: the schema the answer is checked against")
		}
		return nil, nil
	}
	retries, err := schemaRetries(with)
	if err != nil {
		return nil, err
	}
	var doc any
	var src []byte  // doc as JSON
	var file string // "" for a schema written in the workflow
	switch v := raw.(type) {
	case map[string]any:
		if path := templateIn(v, nil); path != nil {
			return nil, steps.FieldErrorf(withPath(append([]string{"output-schema"}, path...)...),
				"with.output-schema cannot hold ${{ }}: the schema is compiled when the workflow is loaded")
		}
		// The YAML values (ints, nested maps) as JSON would give them.
		if src, err = json.Marshal(v); err == nil {
			doc, err = decodeJSON(src)
		}
		if err != nil {
			return nil, steps.FieldErrorf(withPath("output-schema"), "with.output-schema: %v", err)
		}
	case string:
		if v == "" {
			return nil, steps.FieldErrorf(withPath("output-schema"), "with.output-schema is empty: give a JSON Schema (a mapping) or the path of a JSON file holding one")
		}
		if strings.Contains(v, "${{") {
			return nil, steps.FieldErrorf(withPath("output-schema"), "with.output-schema must name a file as written, not an expression: the schema is compiled when the workflow is loaded")
		}
		file = v
		if !filepath.IsAbs(file) {
			file = filepath.Join(dir, file)
		}
		if doc, src, err = readSchemaFile(file); err != nil {
			return nil, steps.FieldErrorf(withPath("output-schema"), "with.output-schema: %w", err)
		}
	default:
		return nil, steps.FieldErrorf(withPath("output-schema"), "with.output-schema: want a JSON Schema (a mapping) or the path of a JSON file holding one, got %s", describeWith(raw))
	}
	schema, err := compileSchema(doc, src, file, dir)
	if err != nil {
		return nil, err
	}
	text, _ := json.Marshal(doc)
	return &outputSchema{schema: schema, text: string(text), shape: schema.shapeOf(), retries: retries}, nil
}

// schemaRetries reads with.schema-retries: a whole number from 0 to
// maxSchemaRetries, default defaultSchemaRetries.
func schemaRetries(with map[string]any) (int, error) {
	v, ok := with["schema-retries"]
	if !ok {
		return defaultSchemaRetries, nil
	}
	n := -1
	switch x := v.(type) {
	case int:
		n = x
	case uint64:
		n = int(min(x, math.MaxInt32))
	case float64:
		if x == math.Trunc(x) && x >= 0 && x <= math.MaxInt32 {
			n = int(x)
		}
	}
	if n < 0 || n > maxSchemaRetries {
		return 0, steps.FieldErrorf(withPath("schema-retries"), "with.schema-retries: want a whole number from 0 to %d (follow-up prompts after an answer that does not match output-schema), got %s", maxSchemaRetries, describeWith(v))
	}
	return n, nil
}

// templateIn returns the path to the first string under v (a mapping or
// a list) that holds ${{, in key order, or nil.
func templateIn(v any, path []string) []string {
	switch x := v.(type) {
	case string:
		if strings.Contains(x, "${{") {
			return append([]string{}, path...)
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if p := templateIn(x[k], append(path, k)); p != nil {
				return p
			}
		}
	case []any:
		for i, it := range x {
			if p := templateIn(it, append(path, strconv.Itoa(i))); p != nil {
				return p
			}
		}
	}
	return nil
}

// readSchemaFile reads a schema file: a regular file of at most
// maxSchemaFile bytes holding one JSON value. It returns the value decoded
// with UseNumber, and the file.
func readSchemaFile(path string) (any, []byte, error) {
	b, err := regularfile.Read(path, maxSchemaFile)
	var nr *regularfile.NotRegularError
	var tl *regularfile.TooLargeError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil, fmt.Errorf("the schema file %s does not exist", path)
	case errors.As(err, &nr):
		return nil, nil, fmt.Errorf("the schema file %s is not a regular file (%s)", path, nr.Kind)
	case errors.As(err, &tl):
		return nil, nil, fmt.Errorf("the schema file %s is too large (%v; a schema is at most %s)", path, err, bytesize.Format(maxSchemaFile))
	case err != nil:
		return nil, nil, fmt.Errorf("the schema file %s cannot be read: %v", path, err)
	}
	doc, err := decodeJSON(b)
	if err != nil {
		return nil, nil, fmt.Errorf("%s%s is not JSON: %v", path, lineCol(b, err), err)
	}
	return doc, b, nil
}

// decodeJSON decodes one JSON value with UseNumber, so that a schema's
// numbers are checked as written.
func decodeJSON(b []byte) (any, error) {
	if !json.Valid(b) {
		var v any
		return nil, json.Unmarshal(b, &v) // says where
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

// lineCol is ":LINE:COL" of a JSON syntax error in src, or "".
func lineCol(src []byte, err error) string {
	var se *json.SyntaxError
	if !errors.As(err, &se) || se.Offset <= 0 || se.Offset > int64(len(src)) {
		return ""
	}
	before := src[:se.Offset-1]
	line := bytes.Count(before, []byte("\n")) + 1
	col := len(before) - bytes.LastIndexByte(before, '\n')
	return fmt.Sprintf(":%d:%d", line, col)
}

// compileSchema compiles doc (src is its JSON; draft 2020-12 unless its
// $schema says draft-07). file is the schema file's path, "" for a schema
// written in the workflow: an error in an inline schema is placed on the
// value at fault, one in a file on output-schema, naming the file and the
// place in it.
func compileSchema(doc any, src []byte, file, dir string) (*schemaDoc, error) {
	path := file
	if path == "" {
		path = filepath.Join(dir, "output-schema.json")
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	schema, fault := newSchemaDoc(doc, src, &url.URL{Scheme: "file", Path: filepath.ToSlash(path)})
	if fault == nil {
		return schema, nil
	}
	what := "with.output-schema is"
	at := withPath("output-schema")
	if file != "" {
		what = "with.output-schema: " + file + " is"
	} else {
		at = append(at, fault.at...)
	}
	kind := "not a valid JSON Schema"
	if fault.unusable {
		kind = "not a schema acpflow can use"
	}
	return nil, steps.FieldErrorf(at, "%s %s: at %s: %s", what, kind, quoted(pointer(fault.at)), fault.msg)
}

// check reads a final message as the schema's value: the whole message as
// JSON, else its last ```json block. It returns the value (decoded as
// expressions see JSON: float64 numbers, maps, lists) or what is wrong,
// each problem bounded.
//
// The library decides whether the value matches. It says only its first
// fault, so an answerWalk lists them all, and bounds the work first: an
// answer it cannot finish is too large to check, and the library is not
// asked.
func (o *outputSchema) check(final string) (any, []string) {
	text, err := answerJSON(final)
	if err != nil {
		return nil, []string{err.Error()}
	}
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return nil, []string{"the answer is not JSON: " + err.Error()}
	}
	w := answerWalk{doc: o.schema}
	w.apply(o.schema.root, v, nil)
	if w.tooMuch {
		return nil, []string{fmt.Sprintf("the answer is too large to check against the schema (more than %d schemas applied, or nested more than %d deep): answer with less", maxAnswerChecks, maxAnswerDepth)}
	}
	err = o.schema.validate(v)
	switch {
	case err == nil:
		return v, nil
	case len(w.found) == 0:
		// The walk and the library disagree; the library decides.
		return nil, []string{cutUTF8("the answer does not match the schema: "+err.Error(), maxProblemBytes)}
	}
	return nil, problems(w.found, w.dropped)
}

// validate is the library's verdict on v. Its asserts panic on states it
// believes unreachable; one reached is a mismatch, not a crash of the run.
func (d *schemaDoc) validate(v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the JSON Schema library failed on it: %v", r)
		}
	}()
	return d.resolved.Validate(v)
}

// problems lists what is wrong with an answer (as "at '/approved': got
// string, want boolean"), each at most maxProblemBytes and at most
// maxSchemaProblems of them, sorted by where they are in the answer (then
// by what they say): the same answer gets the same words, and the same
// problems survive the bound. dropped counts problems the walk did not
// keep.
func problems(found []answerProblem, dropped int) []string {
	slices.SortStableFunc(found, func(a, b answerProblem) int {
		if c := slices.Compare(a.at, b.at); c != 0 {
			return c
		}
		return strings.Compare(a.msg, b.msg)
	})
	var all []string
	for _, p := range found {
		msg := cutUTF8("at "+quoted(pointer(p.at))+": "+p.msg, maxProblemBytes)
		if !slices.Contains(all, msg) {
			all = append(all, msg)
		}
	}
	if len(all)+dropped > maxSchemaProblems {
		more := len(all) + dropped - maxSchemaProblems + 1
		all = append(all[:maxSchemaProblems-1], fmt.Sprintf("… and %d more", more))
	}
	return all
}

// answerJSON finds the JSON of a final message: the whole message when it
// is JSON, else the content of its last fenced ```json block. A message
// that looks like JSON but is not says what is wrong with it.
func answerJSON(final string) (string, error) {
	text := strings.TrimSpace(final)
	if text == "" {
		return "", errors.New("the final message is empty; the answer must be JSON")
	}
	if json.Valid([]byte(text)) {
		return text, nil
	}
	if block, ok := lastJSONBlock(final); ok {
		if !json.Valid([]byte(block)) {
			return "", fmt.Errorf("the last ```json block of the final message is not JSON: %s", jsonError(block))
		}
		return block, nil
	}
	if text[0] == '{' || text[0] == '[' {
		return "", fmt.Errorf("the final message is not JSON: %s", jsonError(text))
	}
	return "", errors.New("the final message is neither JSON nor holds a ```json block")
}

// jsonError says where and why text is not JSON.
func jsonError(text string) string {
	var v any
	err := json.Unmarshal([]byte(text), &v)
	if err == nil {
		return "it is"
	}
	msg := err.Error()
	if lc := lineCol([]byte(text), err); lc != "" {
		line, col, _ := strings.Cut(lc[1:], ":")
		msg += " (line " + line + ", column " + col + ")"
	}
	return cutUTF8(msg, maxProblemBytes)
}

// lastJSONBlock returns the content of the last fenced code block of
// markdown whose info string is json (any case): an opening fence of three
// or more backticks, indented at most three spaces, up to a closing fence
// of at least as many backticks, or to the end of the text.
func lastJSONBlock(markdown string) (string, bool) {
	lines := strings.Split(markdown, "\n")
	var last string
	found := false
	for i := 0; i < len(lines); i++ {
		fence, info, ok := openingFence(lines[i])
		if !ok {
			continue
		}
		var body []string
		j := i + 1
		for ; j < len(lines); j++ {
			if closesFence(lines[j], fence) {
				break
			}
			body = append(body, lines[j])
		}
		if word, _, _ := strings.Cut(info, " "); strings.EqualFold(word, "json") {
			last, found = strings.Join(body, "\n"), true
		}
		i = j
	}
	return last, found
}

// openingFence reads a line that opens a backtick code block: the fence
// and the info string after it.
func openingFence(line string) (fence, info string, ok bool) {
	rest := strings.TrimRight(line, "\r")
	trimmed := strings.TrimLeft(rest, " ")
	if len(rest)-len(trimmed) > 3 {
		return "", "", false
	}
	n := len(trimmed) - len(strings.TrimLeft(trimmed, "`"))
	if n < 3 {
		return "", "", false
	}
	info = strings.TrimSpace(trimmed[n:])
	if strings.Contains(info, "`") {
		return "", "", false
	}
	return trimmed[:n], info, true
}

// closesFence reports whether line closes a block opened by fence.
func closesFence(line, fence string) bool {
	rest := strings.TrimRight(line, "\r")
	trimmed := strings.TrimLeft(rest, " ")
	if len(rest)-len(trimmed) > 3 {
		return false
	}
	ticks := strings.TrimRight(trimmed, " \t")
	return len(ticks) >= len(fence) && strings.Trim(ticks, "`") == ""
}

// followUp is the prompt sent when the final message did not match: what
// was wrong, the schema (when it is short), and what to answer.
func (o *outputSchema) followUp(problems []string) string {
	var b strings.Builder
	b.WriteString("Your answer did not match the JSON Schema this answer must match:\n")
	for _, p := range problems {
		b.WriteString("- ")
		b.WriteString(p)
		b.WriteString("\n")
	}
	if len(o.text) <= maxQuotedSchema {
		b.WriteString("\nThe schema:\n")
		b.WriteString(o.text)
		b.WriteString("\n")
	}
	b.WriteString("\nReply with only the corrected JSON value, nothing before or after it.")
	return b.String()
}

// mismatch is a step's error when its last answer still did not match.
func (o *outputSchema) mismatch(problems []string) error {
	after := ""
	switch o.retries {
	case 0:
	case 1:
		after = " (after 1 follow-up prompt)"
	default:
		after = fmt.Sprintf(" (after %d follow-up prompts)", o.retries)
	}
	return fmt.Errorf("the final message does not match with.output-schema%s: %s", after, strings.Join(problems, "; "))
}

// shapeOf is what the schema says of its values' type, for validate
// (steps.Shape).
func (d *schemaDoc) shapeOf() *steps.Shape {
	budget := maxShapeNodes
	return d.shapeWithin(d.root, &budget)
}

func (d *schemaDoc) shapeWithin(s *jsonschema.Schema, budget *int) *steps.Shape {
	unknown := &steps.Shape{}
	if *budget--; *budget < 0 || s == nil {
		return unknown
	}
	types := s.Types
	if s.Type != "" {
		types = []string{s.Type}
	}
	if s.Ref != "" && (types == nil || d.draft == draft7) {
		return d.shapeWithin(d.at[s].ref, budget)
	}
	if len(types) == 2 && slices.Contains(types, "number") && slices.Contains(types, "integer") {
		types = []string{"number"}
	}
	if len(types) != 1 {
		return unknown
	}
	switch t := types[0]; t {
	case "string", "boolean", "number":
		return &steps.Shape{Type: t}
	case "integer":
		return &steps.Shape{Type: "number"}
	case "array":
		sh := &steps.Shape{Type: "array"}
		if s.Items != nil && s.PrefixItems == nil {
			sh.Items = d.shapeWithin(s.Items, budget)
		}
		return sh
	case "object":
		sh := &steps.Shape{Type: "object", Properties: map[string]*steps.Shape{}}
		for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
			sh.Properties[name] = d.shapeWithin(s.Properties[name], budget)
		}
		switch ap := s.AdditionalProperties; {
		case ap == nil || isTrue(ap):
		case isFalse(ap):
			sh.Closed = len(s.PatternProperties) == 0
		case len(s.PatternProperties) == 0:
			sh.Others = d.shapeWithin(ap, budget)
		}
		return sh
	}
	return unknown
}
