package policies

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// A Form is a way of writing a policy that another package supplies: the
// mapping of a `permission:` or `env:` key that holds the form's name as a
// key (`wasm: policies/strict.wasm`) is decided by the Form registered
// under that name (RegisterForm). The form's package registers it from an
// init function, as a step kind registers with steps, so this package, and
// everything that imports it, links none of what the form needs (a WASM
// runtime for `wasm:`); a binary has the form by importing its package
// (every acpflow binary imports package standard, which imports them all).
type Form interface {
	// Permission makes the permission policy spec describes.
	Permission(spec FormSpec) (Permission, error)
	// Env makes the env policy spec describes.
	Env(spec FormSpec) (Env, error)
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

// FormWASM names the `wasm:` form (docs/wasm.md), supplied by
// policies/wasmpolicy.
const FormWASM = "wasm"

// formSupplier is the package that supplies each form the file format
// knows, and the form's name in an error, by form name.
var formSupplier = map[string]struct{ label, pkg string }{
	FormWASM: {"WASM", "policies/wasmpolicy"},
}

var (
	formsMu sync.RWMutex
	forms   = map[string]Form{}
)

// RegisterForm makes the form name available to ParsePermission and
// ParseEnv. It panics when name is no form the policy file format knows
// (a key of the mapping forms: it is part of the file format, so a package
// cannot add one), or when a form is already registered under it: each is
// a programming error found at start-up.
func RegisterForm(name string, f Form) {
	formsMu.Lock()
	defer formsMu.Unlock()
	if _, ok := formSupplier[name]; !ok {
		panic(fmt.Sprintf("policies: RegisterForm(%q): no such policy form; the forms are %s", name, strings.Join(formNames(), ", ")))
	}
	if f == nil {
		panic(fmt.Sprintf("policies: RegisterForm(%q): nil form", name))
	}
	if _, ok := forms[name]; ok {
		panic(fmt.Sprintf("policies: the policy form %q registered twice", name))
	}
	forms[name] = f
}

// formNames are the forms the file format knows, sorted.
func formNames() []string {
	names := make([]string, 0, len(formSupplier))
	for n := range formSupplier {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// registeredForms is the registry as it stands, for one parse.
func registeredForms() func(name string) (Form, error) {
	return func(name string) (Form, error) {
		formsMu.RLock()
		f, ok := forms[name]
		formsMu.RUnlock()
		if ok {
			return f, nil
		}
		return nil, unlinkedForm(name)
	}
}

// unlinkedForm is the error for a form that no linked package registered.
func unlinkedForm(name string) error {
	s, ok := formSupplier[name]
	if !ok {
		return fmt.Errorf("no policy form %q; the forms are %s", name, strings.Join(formNames(), ", "))
	}
	return fmt.Errorf("%s policies cannot be loaded here (this program does not link %s)", s.label, s.pkg)
}
