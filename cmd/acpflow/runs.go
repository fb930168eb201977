package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/cli"
	"github.com/acpflow/acpflow/cli/words"
	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/internal/suggest"
	"github.com/acpflow/acpflow/internal/termtext"
	"github.com/acpflow/acpflow/internal/transcript"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs"
	"github.com/acpflow/acpflow/steps"
)

func newRunsCmd() *cobra.Command {
	var (
		state   string
		filter  runs.Filter
		jsonOut bool
	)
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List recorded runs, newest first",
		Example: `  acpflow runs
  acpflow runs --status failed -n 10
  acpflow runs --workflow hello --json | jq -r .run_id`,
		Args: cli.Args(""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkWord("status", string(filter.Status), runStatuses); err != nil {
				return err
			}
			s, err := openStore(state)
			if err != nil {
				return cli.UsageError(err)
			}
			defer s.Close()
			list, err := s.ListRuns(cmd.Context(), filter)
			if err != nil {
				return err
			}
			if jsonOut {
				return writeJSONLines(cmd.OutOrStdout(), list, runs.RunJSON)
			}
			printRuns(cmd.OutOrStdout(), list)
			return nil
		},
	}
	addStateFlag(cmd, &state)
	fl := cmd.Flags()
	fl.StringVar((*string)(&filter.Status), "status", "", "only runs with this status ("+strings.Join(runStatuses, ", ")+")")
	fl.StringVar(&filter.Workflow, "workflow", "", "only runs of this workflow (its name or file)")
	fl.StringVar(&filter.Batch, "batch", "", "only runs of this batch")
	fl.IntVarP(&filter.Limit, "limit", "n", 50, "at most this many (0: all)")
	fl.BoolVar(&jsonOut, "json", false, "one JSON object per run")
	return cmd
}

// cellMax bounds a text cell of the runs table, in bytes: a long name
// does not widen every line of it.
const cellMax = 60

// Bounds of what show prints of an agent's words on a line of their own
// (an id, a title, a command), in bytes; each cut says so.
const (
	idMax      = 200
	kindMax    = 40
	titleMax   = 300
	commandMax = 2000
	reasonMax  = 1000
)

func printRuns(w io.Writer, runs []runs.Run) {
	var buf bytes.Buffer
	defer writeSanitized(w, &buf)
	tw := newTable(&buf, "RUN\tWORKFLOW\tSTATUS\tSTARTED\tDURATION\tUSAGE\tBATCH")
	for _, r := range runs {
		batch := "-"
		if r.BatchID != "" {
			batch = fmt.Sprintf("%s:%d", r.BatchID, r.BatchLine)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, termtext.Line(r.Workflow, cellMax), r.Status,
			r.StartedAt.UTC().Format(time.RFC3339), duration(r), runUsageCell(r), batch)
	}
	tw.Flush()
}

// printBatch prints a batch's head (its budget, why it stopped, the
// sums of its runs' usage) and its runs.
func printBatch(w io.Writer, b *runs.Batch, rs []runs.Run) {
	fmt.Fprintf(w, "batch %s: %d runs\n", b.ID, len(rs))
	if b.Budget != "" {
		fmt.Fprintf(w, "  budget: %s\n", b.Budget)
	}
	if b.Error != "" {
		fmt.Fprintf(w, "  error: %s\n", cli.IndentLines(b.Error, "    "))
	}
	var usages []*steps.Usage
	var ran []bool
	for _, r := range rs {
		if r.Usage != nil {
			usages = append(usages, &r.Usage.Usage)
		} else {
			usages = append(usages, nil)
		}
		ran = append(ran, !r.EndedAt.IsZero())
	}
	if sum := engine.SumUsage(usages, ran); sum != nil {
		fmt.Fprintf(w, "  usage: %s\n", strings.Replace(words.RunUsage(sum), "step(s)", "run(s)", 1))
	}
	printRuns(w, rs)
}

// runUsageCell is a run's usage in the runs table: "-" while it runs.
func runUsageCell(r runs.Run) string {
	if r.EndedAt.IsZero() {
		return "-"
	}
	return words.RunUsage(r.Usage)
}

func duration(r runs.Run) string {
	if r.EndedAt.IsZero() {
		return "-"
	}
	return words.Duration(r.DurationMS)
}

func writeJSONLines[T any](w io.Writer, items []T, conv func(T) map[string]any) error {
	for _, it := range items {
		b, err := json.Marshal(conv(it))
		if err != nil {
			return err
		}
		if _, err := w.Write(append(b, '\n')); err != nil {
			return err
		}
	}
	return nil
}

func newShowCmd() *cobra.Command {
	var (
		state       string
		jsonOut     bool
		lines       int
		transcripts bool
		step        string
	)
	cmd := &cobra.Command{
		Use:   "show RUN_ID",
		Short: "Show one run: steps, outputs, stop reasons, permission decisions, stderr tails",
		Long: `Show one run: steps, outputs, stop reasons, permission decisions, stderr tails;
or, with --transcript, every ACP message of its step attempts (--step: one step's),
tool calls with their permission decisions, plans and thoughts; with --json, the raw
messages as JSON lines. A batch id lists the batch's runs.`,
		Example: `  acpflow show 20261202T180412-3f9a
  acpflow show 20261202T180412-3f9a --json | jq .steps
  acpflow show 20261202T180412-3f9a --transcript --step review`,
		Args: cli.Args("see 'acpflow runs' for ids", "RUN_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if step != "" && !transcripts {
				return cli.UsageErrorf("--step is for --transcript")
			}
			s, id, kind, err := openRecorded(cmd.Context(), state, args[0])
			if err != nil {
				return err
			}
			defer s.Close()
			if transcripts {
				if kind == runs.KindBatch {
					return cli.UsageErrorf("%s is a batch: show the transcript of one of its runs (acpflow show %s lists them)", id, id)
				}
				return showTranscript(cmd, s, id, step, jsonOut)
			}
			if kind == runs.KindBatch {
				list, err := s.RunsOfBatch(cmd.Context(), id)
				if err != nil {
					return err
				}
				if jsonOut {
					return writeJSONLines(cmd.OutOrStdout(), list, runs.RunJSON)
				}
				b, err := s.GetBatch(cmd.Context(), id)
				if err != nil {
					return err
				}
				printBatch(cmd.OutOrStdout(), b, list)
				return nil
			}
			d, err := s.GetRun(cmd.Context(), id)
			if err != nil {
				return err
			}
			els, err := s.Elements(cmd.Context(), id)
			if err != nil {
				return err
			}
			if jsonOut {
				b, err := json.MarshalIndent(runs.DetailJSON(d, els), "", "  ")
				if err != nil {
					return err
				}
				_, err = fmt.Fprintln(cmd.OutOrStdout(), string(b))
				return err
			}
			printDetail(cmd.OutOrStdout(), d, els, lines)
			return nil
		},
	}
	addStateFlag(cmd, &state)
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the run as JSON")
	cmd.Flags().IntVar(&lines, "stderr-lines", 20, "how many of each agent's last stderr lines to print")
	cmd.Flags().BoolVar(&transcripts, "transcript", false, "print the ACP messages of the run's step attempts")
	cmd.Flags().StringVar(&step, "step", "", "with --transcript: only this step's attempts")
	return cmd
}

// showTranscript prints a run's transcripts (show --transcript): readably,
// or the raw messages as JSON lines.
func showTranscript(cmd *cobra.Command, s *runs.Service, id, step string, jsonOut bool) error {
	f, err := s.Export(cmd.Context(), id)
	if err != nil {
		return err
	}
	if step != "" && !slices.ContainsFunc(f.Steps, func(t transcript.Step) bool { return t.Step == step }) {
		var ids []string
		for _, t := range f.Steps {
			if !slices.Contains(ids, t.Step) {
				ids = append(ids, t.Step)
			}
		}
		hint := "its steps with one: " + strings.Join(ids, ", ")
		if c := suggest.Closest(step, ids); c != "" {
			hint = "did you mean " + c + "?"
		}
		return cli.UsageErrorf("run %s has no transcript of a step %q (%s)", id, step, hint)
	}
	if len(f.Steps) == 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "run %s has no transcript: none of its steps talked to an agent, or it was recorded before transcripts were kept\n", id)
		return nil
	}
	if jsonOut {
		return writeRawTranscript(cmd.OutOrStdout(), f, step)
	}
	var buf bytes.Buffer
	(&transcriptView{w: &buf}).file(f, step)
	writeSanitized(cmd.OutOrStdout(), &buf)
	return nil
}

// writeRawTranscript writes each message of f (of step's attempts when
// step is not "") as one JSON line, as it went over the wire, with the
// attempt it belongs to.
func writeRawTranscript(w io.Writer, f *transcript.File, step string) error {
	bw := bufio.NewWriter(w)
	for _, t := range f.Steps {
		if step != "" && t.Step != step {
			continue
		}
		for _, m := range t.Messages {
			line := struct {
				Step    string          `json:"step"`
				Index   *int            `json:"index,omitempty"`
				Attempt int             `json:"attempt"`
				Dir     string          `json:"dir"`
				AtMS    int64           `json:"at_ms"`
				Msg     json.RawMessage `json:"msg"`
			}{t.Step, t.Index, t.Attempt, m.Dir, m.AtMS, m.Msg}
			b, err := json.Marshal(line)
			if err != nil {
				return err
			}
			bw.Write(b)
			bw.WriteByte('\n')
		}
		if err := writeRawExchanges(bw, &t); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// writeRawExchanges writes each model exchange an attempt's gateway
// recorded as one JSON line after its messages, with dir "model".
func writeRawExchanges(w *bufio.Writer, t *transcript.Step) error {
	if t.Model == nil {
		return nil
	}
	for i := range t.Model.Exchanges {
		x := &t.Model.Exchanges[i]
		line := struct {
			Step     string               `json:"step"`
			Index    *int                 `json:"index,omitempty"`
			Attempt  int                  `json:"attempt"`
			Dir      string               `json:"dir"`
			AtMS     int64                `json:"at_ms"`
			Exchange *transcript.Exchange `json:"exchange"`
		}{t.Step, t.Index, t.Attempt, "model", x.AtMS, x}
		b, err := json.Marshal(line)
		if err != nil {
			return err
		}
		w.Write(b)
		w.WriteByte('\n')
	}
	return nil
}

// printDetail prints a run for a person. Nearly everything in it may have
// come from an agent (output, errors, stderr, titles, reasons, session ids),
// so each text is sanitised before it is indented, and the whole once more
// as it is written; show --json keeps the text exact.
// A for-each step gets a row per element (els: the elements done, by
// step, as their element_end events say), and its outputs, a list, one
// JSON value indented.
func printDetail(out io.Writer, d *runs.RunDetail, els map[string][]runs.Element, stderrLines int) {
	var buf bytes.Buffer
	defer writeSanitized(out, &buf)
	w := &buf
	r := d.Run
	fmt.Fprintf(w, "run %s  %s  %s\n", r.ID, r.Workflow, r.Status)
	fmt.Fprintf(w, "  file:      %s\n  workspace: %s\n  started:   %s (%s)\n", r.WorkflowFile, r.Workspace,
		r.StartedAt.UTC().Format(time.RFC3339), duration(r))
	if r.BatchID != "" {
		fmt.Fprintf(w, "  batch:     %s line %d\n", r.BatchID, r.BatchLine)
	}
	if r.TraceID != "" {
		fmt.Fprintf(w, "  trace:     %s\n", traceText(r.TraceID))
	}
	if r.Error != "" {
		fmt.Fprintf(w, "  error:     %s\n", cli.IndentLines(r.Error, "    "))
	}
	if !r.EndedAt.IsZero() {
		fmt.Fprintf(w, "  usage:     %s\n", words.RunUsage(r.Usage))
	}
	for _, wt := range d.Worktrees {
		fmt.Fprintf(w, "  worktree:  %s\n", worktreeText(wt))
	}
	for _, a := range d.Approvals {
		printApproval(w, a)
	}
	printMap(w, "inputs", r.Inputs, nil)
	printMap(w, "outputs", r.Outputs, r.OutputNames)
	for _, st := range d.Steps {
		fmt.Fprintf(w, "\nstep %s: %s", st.StepID, st.Status)
		if st.StopReason != "" {
			fmt.Fprintf(w, " (%s)", termtext.Line(st.StopReason, kindMax))
		}
		fmt.Fprintf(w, ", %d attempt(s), %s\n", st.Attempts, words.Duration(st.DurationMS))
		if st.SessionID != "" {
			fmt.Fprintf(w, "  session: %s\n", termtext.Line(st.SessionID, idMax))
		}
		if st.ExitCode != nil {
			fmt.Fprintf(w, "  exit code: %d\n", *st.ExitCode)
		}
		if st.Attempts > 0 {
			fmt.Fprintf(w, "  usage: %s\n", usageDetail(st.Usage))
		}
		if st.Error != "" {
			fmt.Fprintf(w, "  error: %s\n", cli.IndentLines(st.Error, "    "))
		}
		if sb := st.Sandbox; sb != nil {
			fmt.Fprintf(w, "  sandbox: %s\n", cli.IndentLines(sandboxText(sb), "    "))
		}
		printElements(w, st.Output, st.Status, els[st.StepID])
		for _, p := range st.Permissions {
			printPermission(w, p)
		}
		if out, ok := st.Output.(string); ok && out != "" {
			fmt.Fprintf(w, "  output:\n    %s\n", cli.IndentLines(strings.TrimRight(out, "\n"), "    "))
		} else if st.Output != nil && !ok {
			fmt.Fprintf(w, "  output: %s\n", indentedJSON(st.Output, "  "))
		}
		if st.JSON != nil {
			fmt.Fprintf(w, "  json: %s\n", indentedJSON(st.JSON, "  "))
		}
		if tail := lastLines(st.Stderr, stderrLines); tail != "" {
			fmt.Fprintf(w, "  stderr (last lines):\n    %s\n", cli.IndentLines(tail, "    "))
		}
	}
}

// printPermission prints a step's permission record on a line: the
// decision on a request and the option it chose, or, for a tool the agent
// ran without asking, what the policy would have decided.
func printPermission(w io.Writer, p runs.Permission) {
	if p.Decision == string(policies.DecisionUnasked) {
		what := p.Command
		if what == "" {
			what = p.Title
		}
		fmt.Fprintf(w, "  unasked %s %s: ran without asking%s; the policy would %s (%s, rule %s)", termtext.Line(p.Kind, kindMax),
			termtext.Quote(what, commandMax), cli.UnaskedEnd(p.Status), p.Would, words.Policy(policies.Layer(p.Layer), policies.Source(p.Policy)), p.Rule)
		if p.Reason != "" {
			fmt.Fprintf(w, ": %s", termtext.Line(p.Reason, reasonMax))
		}
		fmt.Fprintln(w)
		return
	}
	opt := p.OptionID
	if p.Outcome != "selected" {
		opt = "cancelled"
	}
	fmt.Fprintf(w, "  permission %s %s: %s -> %s (%s, rule %s)", termtext.Line(p.Kind, kindMax), termtext.Quote(p.Title, titleMax),
		p.Decision, termtext.Line(opt, idMax), words.Policy(policies.Layer(p.Layer), policies.Source(p.Policy)), p.Rule)
	if p.Reason != "" {
		fmt.Fprintf(w, ": %s", termtext.Line(p.Reason, reasonMax))
	}
	switch {
	case p.AnsweredBy != "" && p.Ask == "grant":
		fmt.Fprintf(w, "; granted for the run by %s at %s (approval %s)", termtext.Line(p.AnsweredBy, idMax), p.AnsweredAt, p.Approval)
	case p.AnsweredBy != "":
		fmt.Fprintf(w, "; answered by %s at %s", termtext.Line(p.AnsweredBy, idMax), p.AnsweredAt)
		if p.Approval != "" {
			fmt.Fprintf(w, " (approval %s)", p.Approval)
		}
	}
	fmt.Fprintln(w)
}

// printApproval prints one ask put to people: where it is, its answer
// (who, when, for the rest of the run) and the answers that came late.
func printApproval(w io.Writer, a runs.Approval) {
	what := ""
	if a.Request != nil {
		what = termtext.Line(a.Request.Tool.Kind, kindMax) + " " + termtext.Quote(a.Request.Tool.Command, commandMax)
	}
	fmt.Fprintf(w, "  approval %s: step %s, %s (rule %s): %s", a.ID, termtext.Line(a.StepID, idMax), what, termtext.Line(a.Rule, idMax),
		strings.ReplaceAll(a.Status, "_", " "))
	if a.Status == runs.ApprovalAnswered {
		fmt.Fprintf(w, ", %s by %s at %s", termtext.Line(a.Decision, idMax), termtext.Line(a.AnsweredBy, idMax), a.AnsweredAt.UTC().Format(time.RFC3339))
		if a.ForRun {
			fmt.Fprint(w, ", granted for the rest of the run")
		}
	}
	fmt.Fprintln(w)
	for _, l := range a.Late {
		fmt.Fprintf(w, "    late answer (refused): %s by %s at %s\n", termtext.Line(l.Decision, idMax), termtext.Line(l.By, idMax), l.At.UTC().Format(time.RFC3339))
	}
}

// printMap prints inputs or outputs, in the order of names (the
// workflow's), any other after them in name order; a list or an object
// (or a string that holds one) indented, over several lines.
func printMap(w io.Writer, name string, m map[string]any, names []string) {
	if len(m) == 0 {
		return
	}
	fmt.Fprintf(w, "  %s:\n", name)
	for _, k := range cli.OutputNames(m, names) {
		s := cli.OutputText(m[k])
		fmt.Fprintf(w, "    %s: %s\n", k, cli.IndentLines(strings.TrimRight(s, "\n"), "      "))
	}
}

// indentedJSON is v as JSON, each line after the first led by prefix: an
// object or a list with members over several lines, anything else on one.
func indentedJSON(v any, prefix string) string {
	b, err := json.MarshalIndent(v, prefix, "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// Bounds of an element's row in show: its output's first line, its error's.
const elementHeadMax = 100

// printElements prints a for-each step's row per element: its index,
// status, attempts, time and the head of its output (its error when it
// has one); an element with no element_end is running while the step is,
// else it never started. outputs is the step's output, a list for a
// for-each step: anything else prints nothing, and so does a step none of
// whose elements was recorded (a run recorded before elements were).
func printElements(w io.Writer, outputs any, status engine.Status, done []runs.Element) {
	list, ok := outputs.([]any)
	if !ok || len(done) == 0 {
		return
	}
	byIndex := make(map[int]runs.Element, len(done))
	for _, el := range done {
		byIndex[el.Index] = el
	}
	var succeeded, failed, cancelled int
	for _, el := range byIndex {
		switch engine.Status(el.Status) {
		case engine.StatusSucceeded:
			succeeded++
		case engine.StatusFailed:
			failed++
		default:
			cancelled++
		}
	}
	head := fmt.Sprintf("%d/%d done", succeeded, len(list))
	if failed > 0 {
		head += fmt.Sprintf(", %d failed", failed)
	}
	if cancelled > 0 {
		head += fmt.Sprintf(", %d cancelled", cancelled)
	}
	fmt.Fprintf(w, "  elements: %s\n", head)
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
	for i, out := range list {
		el, ok := byIndex[i]
		if !ok {
			state := "not started"
			if status.Live() {
				state = "running"
			}
			fmt.Fprintf(tw, "    #%d\t%s\t\t\t\n", i, state)
			continue
		}
		text, _ := out.(string)
		what := termtext.Line(headLine(strings.TrimSpace(text)), elementHeadMax)
		if el.Error != "" {
			what = "error: " + termtext.Line(headLine(el.Error), elementHeadMax)
		}
		fmt.Fprintf(tw, "    #%d\t%s\t%d attempt(s)\t%s\t%s\n", i, el.Status, el.Attempts, words.Duration(el.DurationMS), what)
	}
	tw.Flush()
	io.WriteString(w, buf.String())
}

// headLine is s up to its first line break.
func headLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// newTable is a table of the CLI's, its columns two spaces apart, with
// its header line (columns tab-separated) written; Flush prints it.
func newTable(w io.Writer, header string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	return tw
}

// writeSanitized writes what buf holds, made safe for a terminal.
func writeSanitized(w io.Writer, buf *bytes.Buffer) {
	io.WriteString(w, termtext.Sanitize(buf.String()))
}

func lastLines(s string, n int) string {
	s = strings.TrimRight(termtext.Sanitize(s), "\n")
	if s == "" || n <= 0 {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// sandboxText says what a step's sandbox enforced, on one line.
func sandboxText(sb *steps.SandboxRecord) string {
	if !sb.Enforced {
		return "not enforced: " + sb.Warning
	}
	net := sb.Network
	switch net {
	case steps.NetworkList:
		net = "only " + strings.Join(sb.Allow, ", ") + " (through acpflow's proxy)"
	case steps.NetworkGateway:
		net = "only its model gateway"
	}
	s := fmt.Sprintf("Landlock ABI %d; writable: %s; network %s", sb.LandlockABI, strings.Join(sb.Write, ", "), net)
	if len(sb.Refused) > 0 {
		s += "; refused: " + strings.Join(sb.Refused, ", ")
	}
	return s + deniedText(sb)
}

// deniedText lists what the sandbox refused, a line per kind with its
// count, and says when the kernel's refusals are not among them.
func deniedText(sb *steps.SandboxRecord) string {
	var b strings.Builder
	for _, d := range sb.Denied {
		fmt.Fprintf(&b, "\ndenied: %s %s (by %s), %s", d.Op, d.Target(), d.By, times(d.Count))
	}
	if sb.DeniedMore > 0 {
		fmt.Fprintf(&b, "\ndenied: %s more, of other kinds", times(sb.DeniedMore))
	}
	if k := sb.KernelDenials; k != "" && k != steps.KernelDenialsAudit {
		b.WriteString("\nthe kernel's refusals are not listed: " + k)
	}
	return b.String()
}

func times(n int) string {
	if n == 1 {
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}
