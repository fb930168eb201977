package policies

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// A Form is a way of writing a policy that another package supplies: the
// mapping of a `permission:` or `env:` key that holds the form's key
// (`wasm: policies/strict.wasm`) is decided by the Form registered under
// that key (RegisterForm). The form's package registers it from an init
// function, as a step kind registers with steps, so this package, and
// everything that imports it, links none of what the form needs (a WASM
// runtime for `wasm:`) and names none of it; a binary has the form by
// importing its package (every acpflow binary imports package standard,
// which imports them all).
type Form interface {
	// Permission makes the permission policy spec describes.
	Permission(spec FormSpec) (Permission, error)
	// Env makes the env policy spec describes.
	Env(spec FormSpec) (Env, error)
}

// FormInfo is what a form declares of the policy file format when it
// registers: the keys it adds to a policy's mapping and the file it needs.
// The parser, the workflow loader (which lists the files a workflow needs
// and refuses them in a policy given as text) and the workflow bundle of
// the Temporal backend learn the form from it, so adding a form touches its
// own package and package standard only.
type FormInfo struct {
	// Key names the form in a policy's mapping. Its value is the path of
	// the file the form loads (a module), relative to the workflow file's
	// directory: the file the form needs (FilesOf).
	Key string
	// Label names the form's policies in messages ("WASM").
	Label string
	// Keys are the keys the form takes beside Key and `config:`; of them
	// the parser knows `limits:` (FormSpec.Limits).
	Keys []string
	// Description says what a policy of the form is, for editors.
	Description string
	// Schema is the JSON schema (draft-07) of the values of Key and Keys,
	// an object from each key to its schema: `acpflow schema` composes it
	// into the workflow schema's permission and env, as it does a step
	// kind's with: (steps.Kind.Schema).
	Schema json.RawMessage
}

// FormSpec is what a policy file says of a policy of a registered form:
// the path under the form's key, resolved against the workflow file's
// directory (absolute), the `config:` mapping (nil when absent) and the
// `limits:`.
type FormSpec struct {
	Path   string
	Config map[string]any
	Limits Limits
}

// registeredForm is one entry of the registry.
type registeredForm struct {
	FormInfo
	form Form
}

// formSet is the forms one parse knows, sorted by key.
type formSet []registeredForm

var (
	formsMu sync.RWMutex
	forms   = map[string]registeredForm{}
)

// RegisterForm makes the form info declares available to ParsePermission
// and ParseEnv. It panics when the key is empty or is already a key of a
// policy's mapping (one of this package's, or another form's), when the
// schema does not describe each of the form's keys, or when f is nil: each
// is a programming error found at start-up.
func RegisterForm(info FormInfo, f Form) {
	formsMu.Lock()
	defer formsMu.Unlock()
	switch {
	case info.Key == "" || strings.ContainsAny(info.Key, ". []"):
		panic(fmt.Sprintf("policies: RegisterForm(%q): a form's key is a word, as a policy file writes it", info.Key))
	case f == nil:
		panic(fmt.Sprintf("policies: RegisterForm(%q): nil form", info.Key))
	case slices.Contains(permissionBaseKeys, info.Key) || slices.Contains(envBaseKeys, info.Key) || info.Key == "config":
		panic(fmt.Sprintf("policies: RegisterForm(%q): that key is the policy file format's own", info.Key))
	}
	if _, ok := forms[info.Key]; ok {
		panic(fmt.Sprintf("policies: the policy form %q registered twice", info.Key))
	}
	var schema map[string]json.RawMessage
	if err := json.Unmarshal(info.Schema, &schema); err != nil {
		panic(fmt.Sprintf("policies: RegisterForm(%q): its schema is no JSON object of its keys: %v", info.Key, err))
	}
	for _, k := range append([]string{info.Key}, info.Keys...) {
		if schema[k] == nil {
			panic(fmt.Sprintf("policies: RegisterForm(%q): its schema has no member %q", info.Key, k))
		}
	}
	if info.Label == "" {
		info.Label = info.Key
	}
	info.Keys = slices.Clone(info.Keys)
	forms[info.Key] = registeredForm{FormInfo: info, form: f}
}

// registeredForms is the registry as it stands, for one parse.
func registeredForms() formSet {
	formsMu.RLock()
	defer formsMu.RUnlock()
	set := make(formSet, 0, len(forms))
	for _, f := range forms {
		set = append(set, f)
	}
	slices.SortFunc(set, func(a, b registeredForm) int { return strings.Compare(a.Key, b.Key) })
	return set
}

// Forms lists what the registered forms declare, sorted by key.
func Forms() []FormInfo {
	set := registeredForms()
	out := make([]FormInfo, len(set))
	for i, f := range set {
		out[i] = f.FormInfo
	}
	return out
}

// FilesOf lists the files a policy's specification v (the decoded YAML of
// a `permission:` or `env:`) names under a registered form's key, as
// written: what a workflow needs besides itself (a module a bundle carries
// along, a path a policy given as text must not make anyone open).
func FilesOf(v any) []string {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	var files []string
	for _, f := range registeredForms() {
		if path, _ := m[f.Key].(string); path != "" {
			files = append(files, path)
		}
	}
	return files
}

// keys are base followed by the forms' keys, then config: and the keys the
// forms take beside theirs, each once: the order keys are suggested in.
func (set formSet) keys(base []string) []string {
	keys := slices.Clone(base)
	for _, f := range set {
		keys = append(keys, f.Key)
	}
	keys = append(keys, "config")
	for _, f := range set {
		for _, k := range f.Keys {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	return keys
}

// in is the form whose key m holds, if any; a second one is reported.
func (set formSet) in(p *specParser, m map[string]any) (registeredForm, bool) {
	var found []registeredForm
	for _, f := range set {
		if _, ok := m[f.Key]; ok {
			found = append(found, f)
		}
	}
	for _, f := range found[min(1, len(found)):] {
		p.fail(f.Key, "cannot go with %s: a %s policy decides alone", found[0].Key, found[0].Key)
	}
	if len(found) == 0 {
		return registeredForm{}, false
	}
	return found[0], true
}

// takers are the keys of the forms that take key beside theirs.
func (set formSet) takers(key string) []string {
	var out []string
	for _, f := range set {
		if slices.Contains(f.Keys, key) {
			out = append(out, f.Key)
		}
	}
	return out
}

// formOnly reports each key of m that only a form takes, in a mapping of
// no form.
func (p *specParser) formOnly(m map[string]any, set formSet) {
	for _, f := range set {
		for _, k := range f.Keys {
			if _, ok := m[k]; ok && set.takers(k)[0] == f.Key {
				p.fail(k, "only a %s policy has %s", strings.Join(set.takers(k), " or "), k)
			}
		}
	}
}

// or is the tail of a "want a mapping with …" message: the forms' keys.
func (set formSet) or() string {
	var s string
	for _, f := range set {
		s += " or " + f.Key + ":"
	}
	return s
}
