// Package outputschema is `output-schema:`: a step's declared JSON Schema,
// compiled when the workflow is loaded, and the check of a step's answer
// against it (docs/acp-subagent.md#structured-output). An agent step
// checks its final message, a shell step its stdout; each kind words what
// follows a mismatch (a follow-up prompt, a failed step) itself.
//
// The JSON Schema library (github.com/google/jsonschema-go) decides
// whether a value matches. This package refuses, at load time, what the
// library would accept and then misread (schemadoc.go), bounds the work an
// answer can cost, and names every problem of an answer where it is
// (walk.go): the library reports only its first.
package outputschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/acpflow/acpflow/internal/bytesize"
	"github.com/acpflow/acpflow/internal/regularfile"
	"github.com/acpflow/acpflow/internal/termtext"
	"github.com/acpflow/acpflow/steps"
)

// Bounds of structured output.
const (
	// maxSchemaFile bounds an output-schema file.
	maxSchemaFile = 1 << 20
	// MaxProblems and MaxProblemBytes bound the problems a check
	// reports: they quote the answer itself (property names, values), and
	// go into prompts, events and errors.
	MaxProblems     = 10
	MaxProblemBytes = 300
	// maxShapeNodes bounds the type a schema gives steps.ID.json in
	// validate: a recursive schema ($ref: "#") has no end of its own.
	maxShapeNodes = 2000
)

// Schema is a step's with.output-schema, compiled: what its answer must
// be, as JSON.
type Schema struct {
	doc *schemaDoc
	// text is the schema as compact JSON, for a prompt that repeats it.
	text  string
	shape *steps.Shape
	// answer names what is checked, in problems: "the final message",
	// "stdout".
	answer string
}

// Prepare reads, checks and compiles with.output-schema (a mapping, or the
// path of a JSON file relative to dir, the workflow file's directory).
// answer names what the kind checks against it, as problems will say it
// ("the final message"). It returns nil for a step without output-schema.
// Its errors are *steps.FieldError.
func Prepare(with map[string]any, dir, answer string) (*Schema, error) {
	raw, ok := with["output-schema"]
	if !ok {
		return nil, nil
	}
	doc, src, file, err := readSchema(raw, dir)
	if err != nil {
		return nil, err
	}
	schema, err := compileSchema(doc, src, file, dir)
	if err != nil {
		return nil, err
	}
	text, _ := json.Marshal(doc)
	return &Schema{doc: schema, text: string(text), shape: schema.shapeOf(), answer: answer}, nil
}

// readSchema reads the schema raw gives: its value decoded, as JSON, and
// its file ("" for a schema written in the workflow).
func readSchema(raw any, dir string) (doc any, src []byte, file string, err error) {
	at := steps.WithPath("output-schema")
	switch v := raw.(type) {
	case map[string]any:
		if path := templateIn(v, nil); path != nil {
			return nil, nil, "", steps.FieldErrorf(append(at, path...),
				"with.output-schema cannot hold ${{ }}: the schema is compiled when the workflow is loaded")
		}
		// The YAML values (ints, nested maps) as JSON would give them.
		if src, err = json.Marshal(v); err == nil {
			doc, err = decodeJSON(src)
		}
		if err != nil {
			return nil, nil, "", steps.FieldErrorf(at, "with.output-schema: %v", err)
		}
		return doc, src, "", nil
	case string:
		if v == "" {
			return nil, nil, "", steps.FieldErrorf(at, "with.output-schema is empty: give a JSON Schema (a mapping) or the path of a JSON file holding one")
		}
		if strings.Contains(v, "${{") {
			return nil, nil, "", steps.FieldErrorf(at, "with.output-schema must name a file as written, not an expression: the schema is compiled when the workflow is loaded")
		}
		file = v
		if !filepath.IsAbs(file) {
			file = filepath.Join(dir, file)
		}
		if doc, src, err = readSchemaFile(file); err != nil {
			return nil, nil, "", steps.FieldErrorf(at, "with.output-schema: %w", err)
		}
		return doc, src, file, nil
	}
	return nil, nil, "", steps.FieldErrorf(at, "with.output-schema: want a JSON Schema (a mapping) or the path of a JSON file holding one, got %s", steps.Describe(raw))
}

// Text is the schema as compact JSON.
func (s *Schema) Text() string { return s.text }

// Shape is what the schema says of its values' type (steps.Shape).
func (s *Schema) Shape() *steps.Shape { return s.shape }

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
	at := steps.WithPath("output-schema")
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

// Check reads an answer as the schema's value: the whole message as
// JSON, else its last ```json block. It returns the value (decoded as
// expressions see JSON: float64 numbers, maps, lists) or what is wrong,
// each problem bounded.
//
// The library decides whether the value matches. It says only its first
// fault, so an answerWalk lists them all, and bounds the work first: an
// answer it cannot finish is too large to check, and the library is not
// asked.
func (o *Schema) Check(final string) (any, []string) {
	text, err := answerJSON(final, o.answer)
	if err != nil {
		return nil, []string{err.Error()}
	}
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return nil, []string{"the answer is not JSON: " + err.Error()}
	}
	w := answerWalk{doc: o.doc}
	w.apply(o.doc.root, v, nil)
	if w.tooMuch {
		return nil, []string{fmt.Sprintf("the answer is too large to check against the schema (more than %d schemas applied, or nested more than %d deep): answer with less", maxAnswerChecks, maxAnswerDepth)}
	}
	err = o.doc.validate(v)
	switch {
	case err == nil:
		return v, nil
	case len(w.found) == 0:
		// The walk and the library disagree; the library decides.
		return nil, []string{termtext.Cut("the answer does not match the schema: "+err.Error(), MaxProblemBytes)}
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
// string, want boolean"), each at most MaxProblemBytes and at most
// MaxProblems of them, sorted by where they are in the answer (then
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
		msg := termtext.Cut("at "+quoted(pointer(p.at))+": "+p.msg, MaxProblemBytes)
		if !slices.Contains(all, msg) {
			all = append(all, msg)
		}
	}
	if len(all)+dropped > MaxProblems {
		more := len(all) + dropped - MaxProblems + 1
		all = append(all[:MaxProblems-1], fmt.Sprintf("… and %d more", more))
	}
	return all
}

// answerJSON finds the JSON of an answer (named by what: "the final
// message"): the whole answer when it is JSON, else the content of its
// last fenced ```json block. An answer that looks like JSON but is not
// says what is wrong with it.
func answerJSON(answer, what string) (string, error) {
	text := strings.TrimSpace(answer)
	if text == "" {
		return "", fmt.Errorf("%s is empty; the answer must be JSON", what)
	}
	if json.Valid([]byte(text)) {
		return text, nil
	}
	if block, ok := lastJSONBlock(answer); ok {
		if !json.Valid([]byte(block)) {
			return "", fmt.Errorf("the last ```json block of %s is not JSON: %s", what, jsonError(block))
		}
		return block, nil
	}
	if text[0] == '{' || text[0] == '[' {
		return "", fmt.Errorf("%s is not JSON: %s", what, jsonError(text))
	}
	return "", fmt.Errorf("%s is neither JSON nor holds a ```json block", what)
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
	return termtext.Cut(msg, MaxProblemBytes)
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
