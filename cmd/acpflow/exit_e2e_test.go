package main

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/cli"
)

// Exit codes are API (docs: exit codes): 2 is bad usage and nothing
// started, 1 is anything else that went wrong. These run the real binary.
func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"an unknown command exits 2", []string{"bogus"}, cli.ExitUsage},
		{"a misspelt command exits 2 and suggests one", []string{"rnu"}, cli.ExitUsage},
		{"an unknown flag exits 2", []string{"runs", "--no-such-flag"}, cli.ExitUsage},
		{"a flag without its value exits 2", []string{"runs", "--limit"}, cli.ExitUsage},
		{"a flag value of the wrong type exits 2", []string{"runs", "--limit", "many"}, cli.ExitUsage},
		{"too few arguments exit 2", []string{"show"}, cli.ExitUsage},
		{"too many arguments exit 2", []string{"show", "a", "b"}, cli.ExitUsage},
		{"an argument to a command that takes none exits 2", []string{"version", "extra"}, cli.ExitUsage},
		{"no argument where one or more are needed exits 2", []string{"validate"}, cli.ExitUsage},
		{"a subcommand's wrong argument count exits 2", []string{"policy", "eval"}, cli.ExitUsage},
		{"help exits 0", []string{"help", "run"}, cli.ExitOK},
		{"no command at all shows help and exits 0", nil, cli.ExitOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := acpflow(t, dir, tc.args...)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d\n%s", r.code, tc.code, r.stderr)
			}
			// An argument error begins with the command's path ("acpflow
			// show: missing RUN_ID"), every other with the binary's.
			if tc.code == cli.ExitUsage && !strings.HasPrefix(r.stderr, "acpflow: ") &&
				!(len(tc.args) > 0 && strings.HasPrefix(r.stderr, "acpflow "+tc.args[0])) {
				t.Errorf("stderr does not say why:\n%s", r.stderr)
			}
		})
	}
}

// An error that is not about how acpflow was called (here: a run store
// whose record cannot be read) exits 1, not 2.
func TestAnErrorThatIsNotUsageExits1(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	hello := filepath.Join(repoRoot(t), "workflows", "examples", "hello.yaml")
	r := acpflow(t, dir, "run", hello, "--state", state, "--output", filepath.Join(dir, "out.jsonl"))
	if r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	list := acpflow(t, dir, "runs", "--state", state)
	fields := strings.Fields(strings.SplitN(list.stdout, "\n", 3)[1])
	if len(fields) == 0 {
		t.Fatalf("runs printed no run:\n%s", list.stdout)
	}
	id := fields[0]
	db, err := sql.Open("sqlite", state)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE runs SET inputs_json = '{' WHERE id = ?`, id); err != nil {
		t.Fatal(err)
	}
	db.Close()

	r = acpflow(t, dir, "show", id, "--state", state)
	if r.code != cli.ExitFailed {
		t.Errorf("show of an unreadable record: exit %d, want 1\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "acpflow: ") {
		t.Errorf("stderr does not say why:\n%s", r.stderr)
	}
}
