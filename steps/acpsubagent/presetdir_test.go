package acpsubagent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// The files that make gemini and qwen ask must be written, or the spawn
// fails naming the file: an agent started without them runs on its own
// settings (issue 35 found the write's error checked in the wrong scope).
// Each case leaves a directory where one file goes, which fails the
// write even for root.
func TestAPresetFileThatCannotBeWrittenFailsNamingIt(t *testing.T) {
	for _, name := range []string{"gemini", "qwen"} {
		p, ok := acpagent.LookupPreset(name)
		if !ok || len(p.Files) == 0 {
			t.Fatalf("preset %s has no files", name)
		}
		for file := range p.Files {
			t.Run(name+"/"+file, func(t *testing.T) {
				dir := t.TempDir()
				blocked := filepath.Join(dir, file)
				if err := os.MkdirAll(blocked, 0o700); err != nil {
					t.Fatal(err)
				}
				err := writePresetFiles(dir, p.Files)
				if err == nil {
					t.Fatalf("writePresetFiles succeeded with %s a directory", blocked)
				}
				if !strings.Contains(err.Error(), blocked) {
					t.Errorf("error %q does not name %s", err, blocked)
				}
			})
		}
	}
}

func TestPresetFilesAreWrittenWithTheirDirectoryFilledIn(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{"a.toml": "x", "sub/b.json": "at " + acpagent.PresetDirVar}
	if err := writePresetFiles(dir, files); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "sub", "b.json"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "at "+dir {
		t.Errorf("sub/b.json = %q, want %q", got, "at "+dir)
	}
	if fi, err := os.Stat(filepath.Join(dir, "a.toml")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("a.toml: %v, mode %v; want 0600", err, fi)
	}
}
