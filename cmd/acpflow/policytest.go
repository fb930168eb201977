package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/cli"
	"github.com/acpflow/acpflow/internal/termtext"
	"github.com/acpflow/acpflow/internal/transcript"
	"github.com/acpflow/acpflow/runs/whatif"
)

func newPolicyTestCmd() *cobra.Command {
	p := &policyTest{}
	cmd := &cobra.Command{
		Use:   "test POLICY (--runs FILTER | --transcripts FILE...)",
		Short: "Re-decide recorded permission requests and spawns under a policy and show what would change",
		Long: `Re-decide every permission request agents sent in recorded runs, and the
environment of every recorded spawn, under POLICY, and show what would change:
per changed request, the old and the new decision with the rule that made
each; per changed spawn, the names the agent would get or lose; then totals.
No agent runs.

POLICY is a bare policy file (as policy eval takes) or a workflow: its
permission and env policies, and a step's own for the step with that id. A
file without an env policy is tested with the default one, as a run would
use; a bare file without permission: decides no request.

The requests come from the run store (--runs) or transcript files written by
acpflow export (--transcripts; more files may follow as arguments). --runs
takes all, KEY=VALUE pairs joined by commas with the keys of acpflow runs
(workflow=NAME, status=STATUS, batch=ID, limit=N for the newest N), or a run
or batch id.

Each request is rebuilt as the live client built it. Its cwd is the one the
step's session was opened with; its workspace is the run's (for a transcript
file, which names none, that cwd). The old decision is acpflow's record of
it, else the answer the agent was sent. A change is another decision or
outcome; the same decision by another rule is not one (--json shows both
rules). A request acpflow answered itself (after a cancel, for another
session) is not decided again. A spawn is recorded by variable names only,
so every value is "[redacted]" to the env policy. See docs/transcripts.md.

Requests are decided within the outer policy, as a run would decide them now
(--policy, $ACPFLOW_POLICY, /etc/acpflow/policy.yaml, the user's file); an
answer says which layer gave it.

Transcript files are read a step attempt at a time, so a file of any size is
tested in bounded memory; only regular files are read (a named pipe or a
device is refused).

Exit 1 when any decision or spawn changed, 0 when none did, 2 for bad usage,
a policy that does not load, or transcripts that cannot be read (a file that
is not one, a corrupted transcript in the store).`,
		Example: `  # what would a stricter policy have changed in the last 20 runs?
  acpflow policy test strict.yaml --runs limit=20
  acpflow policy test strict.yaml --runs workflow=review,status=succeeded --json
  acpflow policy test strict.yaml --transcripts testdata/*.transcript.json`,
		Args: cli.Args("a policy or workflow file to test", "POLICY", "[FILE...]"),
		RunE: p.run,
	}
	addStateFlag(cmd, &p.state)
	addPolicyFlag(cmd, &p.policy)
	fl := cmd.Flags()
	fl.StringVar(&p.runsFilter, "runs", "", "the recorded runs: all, KEY=VALUE[,KEY=VALUE] (workflow, status, batch, limit) or a run or batch id")
	fl.StringArrayVar(&p.files, "transcripts", nil, "transcript files (acpflow export); more may follow as arguments")
	fl.BoolVar(&p.jsonOut, "json", false, "one JSON object per request and per spawn (changed or not), then the totals")
	return cmd
}

// policyTest is policy test's flags; run is the command.
type policyTest struct {
	runsFilter string
	files      []string
	jsonOut    bool
	state      string
	policy     string
}

// run re-decides the requests --runs or --transcripts name under POLICY
// (args[0]) and reports what changed.
func (p *policyTest) run(cmd *cobra.Command, args []string) error {
	p.files = append(p.files, args[1:]...)
	switch {
	case p.runsFilter != "" && len(p.files) > 0:
		return cli.UsageErrorf("give --runs or --transcripts, not both")
	case p.runsFilter == "" && len(p.files) == 0 && len(args) > 1:
		return cli.UsageErrorf("unexpected arguments %q: transcript files go with --transcripts", args[1:])
	case p.runsFilter == "" && len(p.files) == 0:
		return cli.UsageErrorf("policy test needs the requests to decide: --runs FILTER (recorded runs) or --transcripts FILE...")
	}
	pol, err := loadWhatIfPolicies(args[0])
	if err != nil {
		return err
	}
	if pol.Outer, err = loadOuter(p.policy); err != nil {
		return err
	}
	t := whatif.New(pol)
	out := bufio.NewWriter(cmd.OutOrStdout())
	defer out.Flush()
	report := whatif.Report{
		Request: func(r *whatif.Result) error { return writeWhatIfResult(out, r, p.jsonOut) },
		Spawn:   func(r *whatif.SpawnResult) error { return writeWhatIfSpawn(out, r, p.jsonOut) },
	}
	if p.runsFilter != "" {
		err = testRecordedRuns(cmd, t, p.state, p.runsFilter, report)
	} else {
		err = testTranscriptFiles(cmd, t, p.files, report)
	}
	if err != nil {
		return err
	}
	tot := t.Totals()
	if err := writeWhatIfTotals(out, tot, pol.Permission != nil, !pol.NoSpawns, p.jsonOut); err != nil {
		return err
	}
	if tot.Changes() > 0 {
		return cli.Outcome(cli.ExitFailed)
	}
	return nil
}

// loadWhatIfPolicies reads POLICY as policy eval does (whatif.LoadPolicies,
// which the web UI's what-if page shares); its errors are bad usage.
func loadWhatIfPolicies(file string) (*whatif.Policies, error) {
	pol, err := whatif.LoadPolicies(file)
	if err != nil {
		return nil, cli.UsageError(err)
	}
	return pol, nil
}

// testTranscriptFiles tests each file, read a step attempt at a time. A
// file that is not a regular file, or not a transcript, is bad input
// (exit 2), never a change.
func testTranscriptFiles(cmd *cobra.Command, t *whatif.Tester, files []string, report whatif.Report) error {
	for _, path := range files {
		if err := testTranscriptFile(cmd, t, path, report); err != nil {
			return err
		}
	}
	return nil
}

func testTranscriptFile(cmd *cobra.Command, t *whatif.Tester, path string, report whatif.Report) error {
	r, err := transcript.Open(path)
	if err != nil {
		return cli.UsageErrorf("--transcripts: %v", err)
	}
	defer r.Close()
	return unreadableIsUsage("--transcripts", t.Test(cmd.Context(), whatif.FromReader(r), report))
}

// unreadableIsUsage makes transcripts that could not be read bad input
// (exit 2): exit 1 says that a decision changed.
func unreadableIsUsage(flag string, err error) error {
	var ue *whatif.UnreadableError
	if errors.As(err, &ue) {
		return cli.UsageErrorf("%s: %v", flag, err)
	}
	return err
}

func testRecordedRuns(cmd *cobra.Command, t *whatif.Tester, state, filter string, report whatif.Report) error {
	sel, err := whatif.ParseSelection(filter)
	if err != nil {
		return cli.UsageErrorf("--runs: %v", err)
	}
	s, err := openStore(state)
	if err != nil {
		return cli.UsageError(err)
	}
	defer s.Close()
	st, ok := any(s).(whatif.Store)
	if !ok {
		return cli.UsageErrorf("--runs: this acpflow's run store keeps no transcripts; use --transcripts")
	}
	ctx := cmd.Context()
	list, err := sel.Runs(ctx, st)
	if err != nil {
		return cli.UsageErrorf("--runs %s: %v", filter, err)
	}
	for _, r := range list {
		run, err := whatif.LoadRun(ctx, st, r)
		if err != nil {
			return unreadableIsUsage("--runs", err)
		}
		if err := t.Test(ctx, run, report); err != nil {
			return unreadableIsUsage("--runs", err)
		}
	}
	return nil
}

// whatIfLine is a request as --json prints it.
type whatIfLine struct {
	Type string `json:"type"` // "request"
	*whatif.Result
}

// whatIfSpawnLine is a spawn as --json prints it.
type whatIfSpawnLine struct {
	Type string `json:"type"` // "spawn"
	*whatif.SpawnResult
}

type whatIfTotalsLine struct {
	Type string `json:"type"` // "totals"
	whatif.Totals
}

func writeWhatIfResult(w io.Writer, r *whatif.Result, jsonOut bool) error {
	if jsonOut {
		return writeJSONLine(w, whatIfLine{"request", r})
	}
	if !r.Changed {
		return nil
	}
	tool := fmt.Sprintf("%s %q", r.Kind, r.Title)
	if r.Command != "" && r.Command != r.Title {
		tool += fmt.Sprintf(" `%s`", r.Command)
	}
	line := fmt.Sprintf("%s %s: %s: %s → %s\n", r.RunID, whatif.StepLabel(r.Step, r.Index, r.Attempt), tool, whatif.AnswerLabel(r.Old), whatif.AnswerLabel(r.New))
	_, err := io.WriteString(w, termtext.Sanitize(line))
	return err
}

// writeWhatIfSpawn prints a changed spawn: the names the agent would get
// (+) and lose (-), then the old and the new answer.
func writeWhatIfSpawn(w io.Writer, r *whatif.SpawnResult, jsonOut bool) error {
	if jsonOut {
		return writeJSONLine(w, whatIfSpawnLine{"spawn", r})
	}
	if !r.Changed {
		return nil
	}
	var names []string
	for _, n := range r.Added {
		names = append(names, "+"+n)
	}
	for _, n := range r.Removed {
		names = append(names, "-"+n)
	}
	spawn := "spawn of " + r.Agent
	if len(names) > 0 {
		spawn += " " + strings.Join(names, " ")
	}
	line := fmt.Sprintf("%s %s: %s: %s → %s\n", r.RunID, whatif.StepLabel(r.Step, r.Index, r.Attempt), spawn, whatif.EnvAnswerLabel(r.Old), whatif.EnvAnswerLabel(r.New))
	_, err := io.WriteString(w, termtext.Sanitize(line))
	return err
}

// writeWhatIfTotals prints the totals: the requests' (when requests were
// decided again), then the spawns' (when spawns were).
func writeWhatIfTotals(w io.Writer, t whatif.Totals, requests, spawns, jsonOut bool) error {
	if jsonOut {
		return writeJSONLine(w, whatIfTotalsLine{"totals", t})
	}
	var b bytes.Buffer
	if requests {
		fmt.Fprintf(&b, "%s in %s: %d changed, %d unchanged", plural(t.Requests, "request"), plural(t.Runs, "run"), t.Changed, t.Unchanged)
		if t.Skipped > 0 {
			fmt.Fprintf(&b, ", %d not decided again (answered by acpflow itself, or unanswered; --json says why)", t.Skipped)
		}
		b.WriteString("\n")
		for _, p := range t.Pairs {
			old := string(p.Old)
			if old == "" {
				old = "?"
			}
			fmt.Fprintf(&b, "  %s → %s: %d\n", old, p.New, p.Count)
		}
	}
	if spawns {
		b.WriteString(plural(t.Spawns, "spawn"))
		if !requests {
			b.WriteString(" in " + plural(t.Runs, "run"))
		}
		fmt.Fprintf(&b, ": %d changed, %d unchanged", t.SpawnsChanged, t.Spawns-t.SpawnsChanged)
		if t.Spawns == 0 && t.Transcripts > 0 {
			b.WriteString(" (none recorded: runs recorded before acpflow kept spawns, and steps that continued a live session, have none)")
		}
		b.WriteString("\n")
	}
	if t.Truncated > 0 {
		fmt.Fprintf(&b, "%d of %d transcripts were cut short at their size cap: their later requests are not there\n", t.Truncated, t.Transcripts)
	}
	_, err := w.Write(b.Bytes())
	return err
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// writeJSONLine writes v as one line of JSON, commands unescaped (`&&`,
// not `\u0026\u0026`).
func writeJSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
