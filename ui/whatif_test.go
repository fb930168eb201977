package ui

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acpflow/acpflow/engine"
	// The wasm form's key is known where its package is linked, as in
	// every acpflow binary (package standard).
	_ "github.com/acpflow/acpflow/policies/wasmpolicy"
)

// whatIf asks the what-if page about policy (text) over every run.
func (f *fixture) whatIf(policy string) *httptest.ResponseRecorder {
	return f.get("/whatif?" + url.Values{"runs": {"all"}, "policy": {policy}}.Encode())
}

// The what-if page takes a policy's text: a path in its place is text that
// is not a policy, never a file opened, and its errors quote only what
// was sent.
func TestTheWhatIfPageNeverOpensAPathItIsGiven(t *testing.T) {
	f := newFixture(t, Config{})
	f.addRun(t, "r1", time.Now(), engine.StatusSucceeded, "")
	dir := t.TempDir()
	const secret = "AKIA-what-if-secret-0123456789"
	secretFile := filepath.Join(dir, "credentials")
	os.WriteFile(secretFile, []byte("[default]\naws_secret_access_key = "+secret+"\n"), 0o600)
	// A policy file that names the secret as its module, in a file that
	// would load were the path opened.
	policyFile := filepath.Join(dir, "policy.yaml")
	os.WriteFile(policyFile, []byte("permission:\n  wasm: "+secretFile+"\n# "+secret+"\n"), 0o600)
	passwd, _ := os.ReadFile("/etc/passwd")
	firstLine, _, _ := strings.Cut(string(passwd), "\n")
	for _, p := range []string{secretFile, policyFile, "/etc/passwd", "/proc/self/environ", "/etc/shadow", "file://" + secretFile, "../../../../" + secretFile, "~/.aws/credentials"} {
		rec := f.whatIf(p)
		body := rec.Body.String()
		if rec.Code != http.StatusBadRequest || !strings.Contains(body, `id="whatif-error"`) {
			t.Errorf("policy=%s: %d, want 400 with the error", p, rec.Code)
		}
		for _, leak := range []string{secret, "aws_secret_access_key", "PATH=", "HOME=", "root:"} {
			if strings.Contains(body, leak) {
				t.Errorf("policy=%s: the page shows %q from a file", p, leak)
			}
		}
		if firstLine != "" && strings.Contains(body, firstLine) {
			t.Errorf("policy=%s: the page shows /etc/passwd's first line", p)
		}
	}
}

func TestTheWhatIfPageRefusesModulesWorkflowsAndLargeText(t *testing.T) {
	f := newFixture(t, Config{})
	dir := t.TempDir()
	const secret = "module-file-secret-0123456789"
	module := filepath.Join(dir, "strict.wasm")
	os.WriteFile(module, []byte(secret), 0o600)
	schema := filepath.Join(dir, "schema.json")
	os.WriteFile(schema, []byte(`{"type": "object", "title": "`+secret+`"`), 0o600)
	for name, c := range map[string]struct{ text, want string }{
		"a permission module": {"permission:\n  wasm: " + module + "\n", "permission.wasm: a policy given as text cannot load a module file"},
		"an env module":       {"env:\n  wasm: " + module + "\n  config: {}\n", "env.wasm: a policy given as text cannot load a module file"},
		"a relative module":   {"permission:\n  wasm: strict.wasm\n", "cannot load a module file"},
		"a workflow":          {"name: w\nsteps:\n  - id: s\n    run: echo\n    with: {schema: " + schema + "}\n", "this is a workflow"},
		"a workflow's steps":  {"steps: []\npolicies: {permission: allow}\n", "this is a workflow"},
		"too large":           {"permission: allow\n#" + strings.Repeat("x", 64<<10), "more than the limit of 65536 (64 KiB)"},
		"not YAML":            {"permission: [allow\n", "policy:"},
		"a scalar":            {"allow", "policy:"},
	} {
		rec := f.whatIf(c.text)
		body := rec.Body.String()
		if rec.Code != http.StatusBadRequest || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d, want 400 saying %q\n%s", name, rec.Code, c.want, body)
		}
		if strings.Contains(body, secret) {
			t.Errorf("%s: the page shows a file's content", name)
		}
	}
	// A policy's text is decided: with no runs recorded, nothing changes.
	rec := f.whatIf("permission:\n  rules:\n    - if: tool.kind == \"execute\"\n      then: reject\n  default: allow\n")
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `id="whatif-totals"`) {
		t.Errorf("a policy's text: %d\n%s", rec.Code, rec.Body)
	}
	// Its own mistakes quote it, at their line.
	rec = f.whatIf("permission:\n  default: sometimes\n")
	if body := rec.Body.String(); rec.Code != http.StatusBadRequest || !strings.Contains(body, "policy:2:") || !strings.Contains(body, "default: sometimes") {
		t.Errorf("a mistake in the text: %d\n%s", rec.Code, body)
	}
}
