package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersionSaysTheCommitItWasBuiltFrom builds acpflow from this checkout
// as `go build` does where VCS stamping is on (Go's default; this
// machine's GOFLAGS turns it off), with the version and date a release
// sets by -ldflags -X: `version` and `--version` print all three, the
// commit from the build, and the same line.
func TestVersionSaysTheCommitItWasBuiltFrom(t *testing.T) {
	root := repoRoot(t)
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout (or no git): %v", err)
	}
	commit := strings.TrimSpace(string(head))
	// Go stamps VCS information only where .git is a directory: in a
	// linked worktree (.git is a file) it stamps nothing, and the binary
	// rightly says "commit unknown", which the last check covers.
	if fi, err := os.Stat(filepath.Join(root, ".git")); err != nil || !fi.IsDir() {
		t.Skip("a linked git worktree: go build stamps no commit here")
	}
	bin := filepath.Join(t.TempDir(), "acpflow")
	const pkg = "github.com/acpflow/acpflow/internal/version"
	b := exec.Command("go", "build", "-buildvcs=true", "-o", bin,
		"-ldflags", "-X "+pkg+".Version=v9.8.7 -X "+pkg+".Date=2026-12-02T18:00:00Z", "github.com/acpflow/acpflow/cmd/acpflow")
	b.Dir = root
	if out, err := b.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var lines []string
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, err := exec.Command(bin, args...).Output()
		if err != nil {
			t.Fatalf("acpflow %s: %v", args[0], err)
		}
		line := string(out)
		for _, want := range []string{"acpflow v9.8.7 ", "commit " + commit, "built 2026-12-02T18:00:00Z"} {
			if !strings.Contains(line, want) {
				t.Errorf("acpflow %s = %q, want %q in it", args[0], line, want)
			}
		}
		lines = append(lines, line)
	}
	if lines[0] != lines[1] {
		t.Errorf("version and --version differ:\n%s%s", lines[0], lines[1])
	}
	// The binary the other tests run is built with GOFLAGS' -buildvcs=false
	// here: it says what it does not know rather than a wrong commit.
	if r := acpflow(t, t.TempDir(), "--version"); r.code != 0 || !strings.HasPrefix(r.stdout, "acpflow ") || strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("acpflow --version: exit %d, %q", r.code, r.stdout)
	}
}
