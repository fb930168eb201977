package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/acpflow/acpflow/cli"
)

// Covers: `acpflow run --help` shows the flags of cli's run, the
// command acpflow-temporal offers too (its test holds its binary to the
// same set), each with its words, and no other.
func TestRunHelpListsTheFlagsOfTheSharedRunCommand(t *testing.T) {
	r := acpflow(t, t.TempDir(), "run", "--help")
	if r.code != 0 {
		t.Fatalf("run --help: exit %d\n%s", r.code, r.stderr)
	}
	local, _, _ := strings.Cut(r.stdout, "Global Flags:")
	want := map[string]bool{"help": true}
	cli.New(cli.Config{}).Flags().VisitAll(func(f *pflag.Flag) {
		want[f.Name] = true
		if !strings.Contains(local, "--"+f.Name+" ") || !strings.Contains(local, f.Usage) {
			t.Errorf("--%s (%q) is not in run --help:\n%s", f.Name, f.Usage, r.stdout)
		}
	})
	for _, m := range regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z-]+)`).FindAllStringSubmatch(local, -1) {
		if !want[m[1]] {
			t.Errorf("run --help has --%s, which the shared run command has not", m[1])
		}
	}
}
