package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/acpflow/acpflow/cli"
)

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "acpflow-temporal-cmd-")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "acpflow-temporal")
	b := exec.Command("go", "build", "-o", bin, ".")
	b.Stderr = os.Stderr
	if err := b.Run(); err != nil {
		panic("building acpflow-temporal: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// What run, approve and approvals refuse, they refuse before they reach a server (there is none
// here), with exit 2 and words that say where and what.
func TestRunRefusesWhatItCannotDoBeforeItDials(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(src), 0o644)
		return p
	}
	ok := write("ok.yaml", "name: ok\nagents:\n  demo: {builtin: demo}\nsteps:\n  - {id: s, uses: acp-subagent, with: {agent: demo, prompt: hi}}\n")
	broken := write("broken.yaml", "name: broken\nsteps:\n  - {id: s, uses: acp-subagent, with: {agent: nobody, prompt: hi}}\n")
	empty := write("empty.jsonl", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", broken}, "broken.yaml:3:"},
		// --budget is acpflow run's: a batch's, and parsed before anything
		// is read.
		{[]string{"run", ok, "--budget", "tokens=10"}, "--budget is a batch's (with --inputs)"},
		{[]string{"run", ok, "--budget", "tokens=lots", "--inputs", empty}, "--budget:"},
		{[]string{"run", ok, "--sandbox"}, "--sandbox: on Temporal"},
		{[]string{"run", ok, "--concurrency", "0"}, "--concurrency must be at least 1"},
		{[]string{"run", ok, "--timeout", "soon"}, "--timeout"},
		{[]string{"run", ok, "--state", "x.db"}, "--state: on Temporal"},
		{[]string{"run", ok, "--policy", "p.yaml"}, "acpflow-temporal worker --policy"},
		{[]string{"run", ok, "--input", "x=1", "--inputs", empty}, "do not go together"},
		{[]string{"run", ok, "--inputs", empty}, "no input lines"},
		{[]string{"run", ok, "--input", "nope=1"}, "nope"},
		{[]string{"run", ok, "--heartbeat", "10ms"}, "--heartbeat must be at least 1s"},
		{[]string{"run", ok, "--id", "a b\x1b[31m"}, "--id"},
		{[]string{"run", ok, "--id", strings.Repeat("x", 201)}, "want 1 to 200 letters"},
		{[]string{"worker", "--concurrency", "0"}, "--concurrency must be at least 1"},
		// approve: only allow or reject, only --for run, and an id.
		{[]string{"approve", "ap-3f9a0c1d2e4b", "maybe"}, `answer "maybe": want allow or reject`},
		{[]string{"approve", "ap-3f9a0c1d2e4b", "allow", "--for", "step"}, "the one scope is run"},
		{[]string{"approve", "ap-3f9a0c1d2e4b"}, "ANSWER"},
		{[]string{"approvals", "extra"}, "extra"},
	} {
		t.Run(strings.Join(c.args[:1], " ")+" "+c.want, func(t *testing.T) {
			cmd := exec.Command(bin, append(c.args, "--address", "127.0.0.1:1", "--blobs", filepath.Join(dir, "blobs"))...)
			cmd.Dir = dir
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			start := time.Now()
			cmd.Run()
			if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(stderr.String(), c.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr.String(), c.want)
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("took %s: it dialled?", d)
			}
		})
	}
}

// The builtin agents answer as acpflow's do: a worker's builtin: demo is
// this binary started again.
func TestTheBinaryServesTheDemoAgent(t *testing.T) {
	cmd := exec.Command(bin, "agent", "demo")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	in.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}` + "\n"))
	line, err := bufio.NewReader(out).ReadString('\n')
	in.Close()
	if werr := cmd.Wait(); err != nil || werr != nil || !strings.Contains(line, `"protocolVersion"`) {
		t.Errorf("agent demo: %v, %v, %q", err, werr, line)
	}
}

// Covers: `acpflow-temporal run --help` shows every flag of acpflow run
// (cli's, which cmd/acpflow's own test holds its binary to) with its
// words, and only Temporal's --heartbeat and --id besides.
func TestRunHelpListsTheFlagsOfAcpflowRun(t *testing.T) {
	out, err := exec.Command(bin, "run", "--help").Output()
	if err != nil {
		t.Fatal(err)
	}
	help := string(out)
	local, _, _ := strings.Cut(help, "Global Flags:")
	want := map[string]bool{"help": true, "heartbeat": true, "id": true}
	cli.New(cli.Config{}).Flags().VisitAll(func(f *pflag.Flag) {
		want[f.Name] = true
		if !strings.Contains(help, "--"+f.Name+" ") || !strings.Contains(help, f.Usage) {
			t.Errorf("--%s (%q) is not in run --help:\n%s", f.Name, f.Usage, help)
		}
	})
	for _, m := range regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z-]+)`).FindAllStringSubmatch(local, -1) {
		if !want[m[1]] {
			t.Errorf("run --help has --%s, which acpflow run has not", m[1])
		}
	}
}
