package workflows_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/workflows"
)

// Covers: the path a workflow is loaded by (relative, with "..", absolute)
// becomes an absolute File, so that a recorded run finds it again from any
// directory; a file with mistakes is still named as the caller named it.
func TestLoadMakesTheFileAbsoluteAndErrorsNameItAsGiven(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	bad := "name: w\nsteps:\n  - {id: a, uses: acp-subagent, with: {agent: nobody, prompt: hi}}\n"
	os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte(bad), 0o644)
	os.WriteFile(filepath.Join(dir, "ok.yaml"), []byte("name: w\nagents:\n  demo: {builtin: demo}\nsteps:\n  - {id: a, uses: acp-subagent, with: {agent: demo, prompt: hi}}\n"), 0o644)
	t.Chdir(sub)
	for _, path := range []string{"../ok.yaml", filepath.Join("..", "sub", "..", "ok.yaml"), filepath.Join(dir, "ok.yaml")} {
		wf, err := workflows.Load(path)
		if err != nil {
			t.Fatalf("Load(%q): %v", path, err)
		}
		if want := filepath.Join(dir, "ok.yaml"); wf.File != want {
			t.Errorf("Load(%q).File = %q, want %q", path, wf.File, want)
		}
	}
	_, err := workflows.Load("../bad.yaml")
	var es workflows.Errors
	if !errors.As(err, &es) || es[0].File != "../bad.yaml" || !strings.HasPrefix(err.Error(), "../bad.yaml:") {
		t.Errorf("Load(../bad.yaml): %v; want errors at ../bad.yaml", err)
	}
}
