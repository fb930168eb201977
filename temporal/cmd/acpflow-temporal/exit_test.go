package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acpflow/acpflow/cli"
)

// Covers: acpflow and acpflow-temporal exit with the same code for the
// same error (both mains are cli.Main). Each command line below fails
// before acpflow-temporal would need a server, or where the server (none
// here) is what fails; want is the code both must give.
func TestBothBinariesExitAlikeOnTheSameErrors(t *testing.T) {
	dir := t.TempDir()
	acpflowBin := filepath.Join(filepath.Dir(bin), "acpflow")
	b := exec.Command("go", "build", "-o", acpflowBin, "./cmd/acpflow")
	b.Dir = filepath.Join("..", "..", "..")
	if out, err := b.CombinedOutput(); err != nil {
		t.Fatalf("building acpflow: %v\n%s", err, out)
	}
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(src), 0o644)
		return p
	}
	ok := write("ok.yaml", "name: ok\nagents:\n  demo: {builtin: demo}\nsteps:\n  - {id: s, uses: acp-subagent, with: {agent: demo, prompt: hi}}\n")
	unknownAgent := write("agent.yaml", "name: b\nsteps:\n  - {id: s, uses: acp-subagent, with: {agent: nobody, prompt: hi}}\n")
	syntax := write("syntax.yaml", "name: [unclosed\n")
	fails := write("fails.yaml", "name: f\nsteps:\n  - {id: s, run: \"exit 3\"}\n")
	noLines := write("empty.jsonl", "")
	const full = "/dev/full" // every write fails: no space left on device
	for _, c := range []struct {
		name   string
		args   []string
		stdout string // a file stdout goes to ("": none)
		want   int
	}{
		{"a workflow that names an unknown agent", []string{"run", unknownAgent}, "", cli.ExitUsage},
		{"a workflow that is not YAML", []string{"run", syntax}, "", cli.ExitUsage},
		{"a workflow file that is not there", []string{"run", filepath.Join(dir, "missing.yaml")}, "", cli.ExitUsage},
		{"an input the workflow does not declare", []string{"run", ok, "--input", "nope=1"}, "", cli.ExitUsage},
		{"an input file without lines", []string{"run", ok, "--inputs", noLines}, "", cli.ExitUsage},
		{"an unknown flag", []string{"run", ok, "--no-such-flag"}, "", cli.ExitUsage},
		{"a flag value of the wrong type", []string{"run", ok, "--concurrency", "many"}, "", cli.ExitUsage},
		{"a flag without its value", []string{"run", ok, "--timeout"}, "", cli.ExitUsage},
		{"no workflow file", []string{"run"}, "", cli.ExitUsage},
		{"one argument too many", []string{"run", ok, "extra"}, "", cli.ExitUsage},
		{"an unknown command", []string{"bogus"}, "", cli.ExitUsage},
		{"help", []string{"run", "--help"}, "", cli.ExitOK},
		// A run that fails: its step (acpflow), the server it needs
		// (acpflow-temporal).
		{"a run that fails", []string{"run", fails}, "", cli.ExitFailed},
		// Errors nobody coded: acpflow-temporal exited 2 for these, and 0
		// when its stdout was cut short.
		{"completion to a full disk", []string{"completion", "bash"}, full, cli.ExitFailed},
		{"help to a full disk", []string{"run", "--help"}, full, cli.ExitFailed},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.stdout == full {
				if _, err := os.Stat(full); err != nil {
					t.Skip("no /dev/full here")
				}
			}
			var codes []int
			for _, b := range []string{acpflowBin, bin} {
				args := append([]string{}, c.args...)
				if b == bin {
					args = append(args, "--address", "127.0.0.1:1", "--blobs", filepath.Join(dir, "blobs"))
				} else if args[0] == "run" {
					args = append(args, "--state", filepath.Join(dir, "state.db"))
				}
				code, said := runBinary(t, dir, b, c.stdout, args...)
				codes = append(codes, code)
				if code != cli.ExitOK && strings.TrimSpace(said) == "" {
					t.Errorf("%s %s: exit %d without a word", filepath.Base(b), strings.Join(c.args, " "), code)
				}
			}
			if codes[0] != c.want || codes[1] != c.want {
				t.Errorf("%s: acpflow exits %d, acpflow-temporal %d; want %d from both", strings.Join(c.args, " "), codes[0], codes[1], c.want)
			}
		})
	}
	assertNoProcessFrom(t, filepath.Dir(bin))
}

// runBinary runs b in dir with args, stdout to the file stdout names (or
// kept), and returns its exit code and what it said (stdout kept, then
// stderr).
func runBinary(t *testing.T, dir, b, stdout string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(b, args...)
	cmd.Dir = dir
	var said bytes.Buffer
	cmd.Stdout, cmd.Stderr = &said, &said
	if stdout != "" {
		f, err := os.OpenFile(stdout, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd.Stdout = f
	}
	timer := time.AfterFunc(time.Minute, func() { cmd.Process.Kill() })
	defer timer.Stop()
	cmd.Run()
	return cmd.ProcessState.ExitCode(), said.String()
}

// assertNoProcessFrom proves that no process runs a binary from dir (the
// binaries built for these tests, and the agents they start).
func assertNoProcessFrom(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if exe, err := os.Readlink("/proc/" + e.Name() + "/exe"); err == nil && strings.HasPrefix(exe, dir+"/") {
			t.Errorf("process %s (%s) outlived its command", e.Name(), exe)
		}
	}
}
