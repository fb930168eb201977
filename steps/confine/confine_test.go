package confine

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
)

// An outer policy's `sandbox: required` sandboxes what asked for none and
// makes an optional sandbox required; without one, the step's stands.
func TestEffective(t *testing.T) {
	required := policies.Outer{{File: "team.yaml", SandboxRequired: true}}
	optional := &steps.Sandbox{Network: steps.NetworkOff, Optional: true}
	for _, tt := range []struct {
		name  string
		sb    *steps.Sandbox
		outer policies.Outer
		want  string // Sandbox.String(), and "required" or "optional"
	}{
		{"none without a policy is none", nil, nil, "none"},
		{"an optional one stays optional", optional, nil, "write [], deny [], network off optional"},
		{"none under required is the defaults", nil, required, "write [], deny [], network on required"},
		{"optional under required is required", optional, required, "write [], deny [], network off required"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := Effective(tt.sb, tt.outer)
			desc := got.String()
			if got != nil {
				desc += map[bool]string{true: " optional", false: " required"}[got.Optional]
			}
			if desc != tt.want {
				t.Errorf("got %s, want %s", desc, tt.want)
			}
		})
	}
	if !optional.Optional {
		t.Error("Effective changed the step's own sandbox")
	}
}

// The spec denies the default list in the process's HOME and in the
// user's, and acpflow's own files; "~/" is the process's HOME and a
// relative path the workspace's.
func TestRequestSpec(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	t.Setenv("HOME", t.TempDir())
	r := Request{Who: "the command", Sandbox: &steps.Sandbox{Write: []string{"out", "~/cache"}, Deny: []string{"/etc/secret"}},
		Cwd: ws, Workspace: ws, Home: home, StateFiles: []string{"/var/acpflow/state.db"}}
	spec, err := r.Spec()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join(ws, "out"), filepath.Join(home, "cache")}; !slices.Equal(spec.Write, want) {
		t.Errorf("write %v, want %v", spec.Write, want)
	}
	denied := spec.Denied()
	for _, want := range []string{filepath.Join(home, ".ssh"), filepath.Join(os.Getenv("HOME"), ".ssh"), "/etc/secret", "/var/acpflow/state.db"} {
		if !slices.Contains(denied, want) {
			t.Errorf("denied %v lacks %s", denied, want)
		}
	}
	if _, err := (Request{Who: "agent a", Sandbox: &steps.Sandbox{}, Cwd: ws, Home: "relative"}).Spec(); err == nil || !strings.Contains(err.Error(), `agent a: sandbox: HOME "relative"`) {
		t.Errorf("a relative HOME: %v", err)
	}
}

// A cwd or write: entry that leads through a symlink into a denied path
// is refused, saying which key set it and naming both paths; start
// refuses it too, even for a sandbox that is not required.
func TestCheckRefusesALinkIntoADeniedPath(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	link := filepath.Join(ws, "keys")
	if err := os.Symlink(filepath.Join(home, ".ssh"), link); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, cwd, key string
		write          []string
	}{
		{"a write: entry", ws, "write", []string{"keys"}},
		{"the cwd", link, "cwd", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := Request{Who: "the command", Sandbox: &steps.Sandbox{Write: tt.write, Optional: true}, Cwd: tt.cwd, Workspace: ws, Home: home}
			err := r.Check()
			var pe *PathError
			if !errors.As(err, &pe) || pe.Key != tt.key || !strings.Contains(err.Error(), link) || !strings.Contains(err.Error(), "inside the denied "+filepath.Join(home, ".ssh")) {
				t.Fatalf("Check: %v; want a %s error naming %s and the denied ~/.ssh", err, tt.key, link)
			}
			env := map[string]string{}
			c, err := start(r, env, "/bin/true", nil)
			var skipped *unenforced
			if c != nil || err == nil || errors.As(err, &skipped) || !strings.Contains(err.Error(), "nothing was started") {
				t.Errorf("start: %v, %v; want a refusal, not an unenforced sandbox", c, err)
			}
			if env["TMPDIR"] != "" {
				t.Error("start set TMPDIR for a refused sandbox")
			}
		})
	}
}
