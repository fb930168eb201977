package steps

import "fmt"

// FieldError is a problem with one value of the configuration a kind's
// Prepare or an agent's check (acpagent.Check) looks at. The workflow
// loader puts its caret on the value Path leads to, so a kind never needs
// to know where the file wrote it.
//
// # Notes
//
// Path is the keys from the mapping that was checked down to the value:
// from the step for Prepare ({"with", "config", "model"}), from the agent's
// mapping for acpagent.Check ({"dispose", "eof-grace"}). The loader follows
// it as deep as the file goes, so a value the file does not write (a
// default, a preset's) is placed on the nearest key it does. An empty Path
// is the step (or the agent) as a whole.
//
// The message is Err's, whole: the path is not prefixed, so a kind words
// its messages as it likes ("with.agent must name an agent").
type FieldError struct {
	Path []string
	Err  error
	// Excerpt, when set, is the line of the value (a string) that the
	// error is about, up to and including what it is about, and Col that
	// part's column in it (from 1, in characters): the loader finds it in
	// the file to put its caret inside the value, as on an expression of a
	// block scalar's third line.
	Excerpt string
	Col     int
}

// Error is the message of Err.
func (e *FieldError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *FieldError) Unwrap() error { return e.Err }

// FieldErrorf returns a *FieldError at path whose message is formatted as
// fmt.Errorf formats it (%w included).
func FieldErrorf(path []string, format string, args ...any) error {
	return &FieldError{Path: path, Err: fmt.Errorf(format, args...)}
}

// WithPath is the path of a with: value, for a FieldError.
func WithPath(keys ...string) []string {
	return append([]string{"with"}, keys...)
}

// Describe names a raw configuration value in a message: its kind, or the
// value itself when it is short and plain.
func Describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "nothing"
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case bool:
		return fmt.Sprintf("the boolean %t", x)
	case string:
		if x == "" {
			return "an empty string"
		}
		return fmt.Sprintf("the string %q", x)
	}
	return fmt.Sprintf("%v", v)
}
