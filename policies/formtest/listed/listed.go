// Package listed is a policy form for tests only: `listed: FILE` allows
// the tool calls whose titles FILE lists, one a line, and rejects the
// rest; as an env policy it keeps the variables FILE lists. It is a whole
// form in one folder, registered by Register from a test binary and by no
// shipped one: the check that a new form touches its own folder (and
// standard/, to ship it) only.
package listed

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/acpflow/acpflow/policies"
)

// Key is the form's key in a policy's mapping.
const Key = "listed"

// Register registers the form with policies, once per test binary.
func Register() {
	policies.RegisterForm(policies.FormInfo{
		Key: Key, Label: "listed",
		Description: "A file of the tool titles allowed (the variables kept), one a line.",
		Schema:      json.RawMessage(`{"listed": {"type": "string", "minLength": 1}}`),
	}, form{})
}

type form struct{}

// Permission reads the list; a file that cannot be read fails the parse,
// as a WASM module that cannot be loaded does.
func (form) Permission(spec policies.FormSpec) (policies.Permission, error) {
	return load(spec.Path)
}

// Env reads the list, as Permission does.
func (form) Env(spec policies.FormSpec) (policies.Env, error) { return load(spec.Path) }

// list is the lines of one file.
type list struct {
	file  string
	names []string
}

func load(path string) (*list, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the list: %w", err)
	}
	return &list{file: filepath.Base(path), names: strings.Fields(string(data))}, nil
}

// DecidePermission allows a tool call the list names by title (its spaces
// written as _).
func (l *list) DecidePermission(_ context.Context, req *policies.PermissionRequest) (policies.Verdict, error) {
	if slices.Contains(l.names, strings.ReplaceAll(req.Tool.Title, " ", "_")) {
		return policies.Verdict{Decision: policies.Allow, Rule: l.file}, nil
	}
	return policies.Verdict{Decision: policies.Reject, Rule: l.file}, nil
}

// DecideEnv keeps the ambient variables the list names, and every
// explicit one.
func (l *list) DecideEnv(_ context.Context, req *policies.EnvRequest) (policies.EnvDecision, error) {
	env := map[string]string{}
	for name, v := range req.Ambient {
		if slices.Contains(l.names, name) {
			env[name] = v
		}
	}
	for name, v := range req.Explicit {
		env[name] = v
	}
	return policies.EnvDecision{Env: env, Rule: l.file}, nil
}
