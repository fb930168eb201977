package store

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acpflow/acpflow/engine"
)

// helperEnv makes the test binary a writer process for
// TestKilledWriterLosesNoSavedStep instead of running tests.
const helperEnv = "ACPFLOW_STORE_TEST_WRITER"

const eventsPerStep = 5

func TestMain(m *testing.M) {
	if spec := os.Getenv(helperEnv); spec != "" {
		path, runID, _ := strings.Cut(spec, "|")
		if err := writeUntilKilled(path, runID); err != nil {
			fmt.Fprintln(os.Stderr, "writer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// writeUntilKilled records a run with ever more steps, as fast as it can,
// for a minute at most (so that a writer whose test died does not run on).
// After each step's end is saved it prints "saved N"; after every tenth step
// it flushes the events and prints "flushed N". os.Stdout is unbuffered, so a
// line the parent reads was written after the save returned.
func writeUntilKilled(path, runID string) error {
	ctx := context.Background()
	s, err := Open(path)
	if err != nil {
		return err
	}
	if err := s.CreateRun(ctx, Run{ID: runID, Workflow: "durability"}); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for i := 0; time.Now().Before(deadline); i++ {
		st := Step{RunID: runID, StepID: stepName(i), Ord: i, Status: engine.StatusRunning, StartedAt: time.Now()}
		if err := s.SaveStep(ctx, st); err != nil {
			return err
		}
		for j := range eventsPerStep {
			s.AppendEvent(Event{RunID: runID, StepID: st.StepID, Type: "step_update", Fields: map[string]any{"chunk": j}})
		}
		st.Status, st.Output, st.EndedAt = engine.StatusSucceeded, strings.Repeat("output ", 50), time.Now()
		st.Permissions = []Permission{{ToolCallID: "c", Kind: "execute", Decision: "allow", Outcome: "selected"}}
		if err := s.SaveStep(ctx, st); err != nil {
			return err
		}
		fmt.Printf("saved %d\n", i)
		if i%10 == 9 {
			if err := s.Flush(ctx); err != nil {
				return err
			}
			fmt.Printf("flushed %d\n", i)
		}
	}
	return fmt.Errorf("not killed within a minute")
}

func stepName(i int) string { return fmt.Sprintf("s%06d", i) }

// TestKilledWriterLosesNoSavedStep SIGKILLs a process in the middle of
// writing, several times over, and checks that the store opens, is intact,
// and holds every step whose SaveStep had returned and every event flushed.
func TestKilledWriterLosesNoSavedStep(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns writer processes")
	}
	path := filepath.Join(t.TempDir(), "state.db")
	for round := range 3 {
		runID := fmt.Sprintf("run-%d", round)
		// Kill at a different point each round: after 50, 200, 350 lines read.
		saved, flushed := killWriter(t, path, runID, 50+150*round)
		t.Logf("round %d: killed after %d steps saved, events flushed through step %d", round, saved+1, flushed)

		s, err := Open(path)
		if err != nil {
			t.Fatalf("round %d: reopen after kill: %v", round, err)
		}
		integrityCheck(t, s.r)
		d, err := s.GetRun(context.Background(), runID)
		if err != nil {
			t.Fatal(err)
		}
		if d.Run.Status != engine.StatusRunning {
			t.Errorf("run status %q, want running (interrupted)", d.Run.Status)
		}
		if len(d.Steps) < saved+1 {
			t.Fatalf("round %d: %d steps in the store, but %d saves had returned", round, len(d.Steps), saved+1)
		}
		for i := 0; i <= saved; i++ {
			st := d.Steps[i]
			if st.StepID != stepName(i) || st.Status != engine.StatusSucceeded || len(st.Permissions) != 1 {
				t.Errorf("round %d: step %d: %s %s with %d permissions, want %s succeeded with 1", round, i, st.StepID, st.Status, len(st.Permissions), stepName(i))
			}
		}
		events, err := s.Events(context.Background(), runID)
		if err != nil {
			t.Fatal(err)
		}
		perStep := map[string]int{}
		for _, e := range events {
			perStep[e.StepID]++
		}
		for i := 0; i <= flushed; i++ {
			if n := perStep[stepName(i)]; n != eventsPerStep {
				t.Errorf("round %d: step %d has %d events, want %d (flushed)", round, i, n, eventsPerStep)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// killWriter starts a writer process on path and SIGKILLs it once it has
// read after lines from it. It returns the last step the writer said was
// saved and the last whose events it said were flushed (-1 for none).
func killWriter(t *testing.T, path, runID string, after int) (saved, flushed int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+path+"|"+runID)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	saved, flushed = -1, -1
	lines := 0
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		kind, n, ok := strings.Cut(sc.Text(), " ")
		i, err := strconv.Atoi(n)
		if !ok || err != nil {
			t.Fatalf("writer said %q", sc.Text())
		}
		switch kind {
		case "saved":
			saved = i
		case "flushed":
			flushed = i
		}
		if lines++; lines == after {
			// The writer has run on while we read; it is killed wherever it is.
			cmd.Process.Signal(syscall.SIGKILL)
		}
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("writer ended with %v, not killed (after %d lines); stderr:\n%s", err, lines, stderr.String())
	}
	return saved, flushed
}
