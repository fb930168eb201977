package steps

import "time"

// AgentKind is a step kind whose steps talk to the workflow file's named
// agents (`agents:`): it decodes an agent's mapping itself, so that its
// keys, presets and checks live with the kind that runs the agent, not in
// the loader (as caddy's caddyfile.Unmarshaler reads its own block).
type AgentKind interface {
	Kind
	// AgentKeys are the keys an agent's mapping accepts, for strict
	// decoding and "did you mean".
	AgentKeys() []string
	// DecodeAgent builds agent name from its block, reporting each mistake
	// through the block, where the file wrote it. It returns the agent even
	// when a key was wrong, so that the steps naming it are not reported
	// too.
	DecodeAgent(name string, b AgentBlock) *Agent
}

// AgentBlock is the loader's cursor over one agent's mapping, whose keys
// it has checked against AgentKeys already. A path leads from the
// mapping through mappings and lists (a list's element by its index, "0",
// "1", …). The readers report a value of the wrong shape with the loader's
// own messages, at the value, and return false; what names the value in
// the message ("agent \"a\": cwd").
type AgentBlock interface {
	// Has reports whether the file writes path.
	Has(path ...string) bool
	// Value is the plain value at path (map[string]any, []any, string,
	// int, float64, bool, nil) and whether a scalar is there.
	Value(path ...string) (v any, scalar bool)
	// Keys are the keys of the mapping at path, in file order.
	Keys(path ...string) []string
	// Len is the number of elements of the list at path (0: not a list).
	Len(path ...string) int
	// Dir is the workflow file's directory.
	Dir() string

	Fields(path []string, what string, keys []string) bool
	Mapping(path []string, what string) bool
	Literal(path []string, what string) (string, bool)
	Text(path []string, what string) (string, bool)
	Bool(path []string, what string) (bool, bool)
	Duration(path []string, what string) (time.Duration, bool)
	// DurationOrOff reads a duration that may also be 0: the setting is off.
	DurationOrOff(path []string, what string) (time.Duration, bool)
	Sandbox(path []string, what string) *Sandbox
	Gateway(path []string, what string) *Gateway
	// Template compiles s, the text at path, in the scope of the agent:
	// a broken ${{ }} fails validation, not a run.
	Template(path []string, s string)

	// Report places a message on the value at path, as deep as the file
	// goes; on the agent's name when it has none of path.
	Report(path []string, format string, args ...any)
	// ReportKey places a message on the key path ends in.
	ReportKey(path []string, format string, args ...any)
	// Wrong is Report, unless the value is one the loader reported
	// already (an unknown alias).
	Wrong(path []string, format string, args ...any)
	// KnownList is the tail of a message about an unknown word: the
	// closest of known ("; did you mean …?") and all of them.
	KnownList(word string, known []string) string
	// Describe names what is at path, for "want X, got Y".
	Describe(path ...string) string
	// Clean reports whether no mistake was reported since the block was
	// made.
	Clean() bool
}
