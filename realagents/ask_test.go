//go:build realagents

package realagents_test

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/acpflow/acpflow/internal/modelserver"
)

// Issue 15's ask on every agent that completes whole turns: the policy
// asks about the agent's shell command, a person at the terminal (a pty
// from util-linux's script) picks an option from the agent's own, and the
// agent does what was picked.

// askRules asks about every command and allows the rest.
const askRules = `permission:
  rules:
    - {if: 'tool.kind == "execute"', then: ask, reason: a command}
  default: allow`

// optionLine is an option as the question lists it: "  2) Name (kind)".
var optionLine = regexp.MustCompile(`(?m)^\s+(\d+)\) .* \((allow_once|allow_always|reject_once|reject_always)\)\r?$`)

// askedOnTerminal runs the one-step turn workflow on a pty, answers the
// first question with the option of kind, and returns the step's result
// and what the terminal showed.
func (s *sandbox) askedOnTerminal(ta *turnAgent, kind string) (turnResult, string) {
	s.t.Helper()
	scriptBin, err := exec.LookPath("script")
	if err != nil {
		s.t.Skip("script (util-linux) is not installed: no pty to ask on")
	}
	srv, err := modelserver.Start(modelserver.Script{
		{Say: "Creating a file.", Shell: "mkdir -p made && echo hi > made/shell.txt"},
		{Say: "FINAL done"},
	})
	if err != nil {
		s.t.Fatal(err)
	}
	defer srv.Close()
	wf := s.writeTurnWorkflow(ta, srv, "Run the script.", askRules, "")
	out := filepath.Join(s.dir, "results.jsonl")
	line := "stty cols 120 rows 40; " + acpflowBin + " run " + wf + " --timeout 180s --workspace " + s.dir +
		" --state " + filepath.Join(s.dir, "state.db") + " --output " + out
	cmd := exec.Command(scriptBin, "-qfec", line, "/dev/null")
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "TERM=xterm")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	var shown strings.Builder
	done := make(chan struct{})
	go func() {
		defer close(done)
		r := bufio.NewReader(stdout)
		answered := false
		for {
			l, err := r.ReadString('\n')
			shown.WriteString(l)
			if !answered && strings.Contains(l, "and Enter:") {
				answered = true
				for _, m := range optionLine.FindAllStringSubmatch(shown.String(), -1) {
					if m[2] == kind {
						io.WriteString(stdin, m[1]+"\n")
					}
				}
			}
			if err != nil {
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(4 * time.Minute):
		cmd.Process.Kill()
		<-done
		s.t.Fatalf("acpflow on the terminal did not end; it showed:\n%s", shown.String())
	}
	cmd.Wait()
	stdin.Close()
	var res struct {
		Steps map[string]turnResult `json:"steps"`
	}
	b, err := os.ReadFile(out)
	if err != nil || json.Unmarshal(b, &res) != nil {
		s.t.Fatalf("no result (%v); the terminal showed:\n%s", err, shown.String())
	}
	return res.Steps["s"], shown.String()
}

func TestAskLetsThePersonAtTheTerminalDecide(t *testing.T) {
	for _, kind := range []string{"reject_once", "allow_once"} {
		t.Run(kind, func(t *testing.T) {
			forEachTurnAgent(t, func(t *testing.T, s *sandbox, ta *turnAgent) {
				step, shown := s.askedOnTerminal(ta, kind)
				if !strings.Contains(shown, "(agent a) asks permission: execute") || !strings.Contains(shown, "asked by rule 1: a command") {
					t.Errorf("the question was not shown as asked:\n%s", shown)
				}
				if len(step.Permissions) == 0 {
					t.Fatalf("no permission was asked; the terminal showed:\n%s", shown)
				}
				p := step.Permissions[0]
				want := map[string]string{"reject_once": "reject", "allow_once": "allow"}[kind]
				if p["decision"] != want || p["ask"] != "person" || p["rule"] != "1" || p["outcome"] != "selected" {
					t.Errorf("record %v, want %s picked by the person, asked by rule 1", p, want)
				}
				_, err := os.Stat(filepath.Join(s.dir, "made", "shell.txt"))
				if ran := err == nil; ran != (want == "allow") {
					t.Errorf("the person picked %s, and the command ran: %v", kind, ran)
				}
			})
		})
	}
}
