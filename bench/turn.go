package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// turnSection measures one ACP turn (spawn, initialize, session/new, one
// prompt, teardown) against the no-delay agent through every client, runs
// interleaved, and breaks acpflow's wall time down by its own events.
func turnSection(b *bench) *section {
	wf := b.workflow("one-step.yaml", `name: bench
agents:
  fast:
    command: %s
steps:
  - id: one
    uses: acp-subagent
    with:
      agent: fast
      prompt: hello
`, b.testagent)
	run := []string{b.acpflow, "run", wf, "--workspace", b.dir, "--state", b.state}
	variants := []*variant{
		{name: "bare acp-go-sdk client", cmd: command{argv: []string{b.bareclient, "--", b.testagent}, dir: b.dir}},
		{name: "acpflow run (1 step)", cmd: command{argv: run, dir: b.dir}},
	}
	bare, flow := variants[0], variants[1]
	var acpxV *variant
	acpxNote := ""
	if a, err := findAcpx(b.acpxDir); err != nil {
		acpxNote = "acpx: not available (" + err.Error() + ")"
	} else {
		home := filepath.Join(b.dir, "acpx-home")
		check(os.MkdirAll(home, 0o755))
		acpxV = &variant{name: "acpx exec " + a.version + " (Node " + a.nodeVer + ")", cmd: a.command(b.testagent, b.dir, home)}
		if _, err := acpxV.cmd.measure(); err != nil { // also the warm-up
			acpxNote = "acpx: not available (" + firstLine(err.Error()) + ")"
			acpxV = nil
		} else {
			variants = append(variants, acpxV)
		}
	}
	if acpxNote != "" {
		fmt.Println(acpxNote)
	}

	// The breakdown runs acpflow with --json (its events carry times) as
	// one more interleaved series, so the main figures stay those of a
	// plain run.
	jsonRun := command{argv: append(append([]string(nil), run...), "--json"), dir: b.dir}
	var alone, withEvents []sample
	var lines []timeline
	for _, v := range variants { // warm the page cache and the run store
		v.cmd.mustMeasure()
	}
	for i := 0; i < b.n; i++ {
		for _, v := range variants {
			s, err := v.cmd.measure()
			check(err)
			v.samples = append(v.samples, s)
		}
		alone = append(alone, agentAlone(b.testagent, b.dir))
		s, t := runTimeline(jsonRun)
		withEvents, lines = append(withEvents, s), append(lines, t)
	}

	truePath, err := exec.LookPath("true")
	check(err)
	floor := command{argv: []string{truePath}}.mustMeasure()

	sec := &section{title: "One ACP turn"}
	w := &sec.body
	fmt.Fprintf(w, "Spawn, initialize, session/new, one prompt, teardown, against the no-delay test agent\n")
	fmt.Fprintf(w, "(`internal/testagent`, no flags); median of %d runs each, interleaved.\n\n", b.n)
	t := newTable("client", "wall", "CPU", "peak RSS", "wall vs bare", "wall vs acpflow")
	fw := median(flow.samples, wallOf)
	bw := median(bare.samples, wallOf)
	for _, v := range variants {
		wall := median(v.samples, wallOf)
		t.row(v.name, ms(wall), ms(median(v.samples, cpuMs)), mb(median(v.samples, rssKiB)),
			fmt.Sprintf("%.2f×", wall/bw), fmt.Sprintf("%.2f×", wall/fw))
	}
	aw := median(alone, wallOf)
	t.row("(the agent alone, scripted pipe)", ms(aw), ms(median(alone, cpuMs)), mb(median(alone, rssKiB)),
		fmt.Sprintf("%.2f×", aw/bw), fmt.Sprintf("%.2f×", aw/fw))
	t.write(w)
	fmt.Fprintf(w, "\nCPU and peak RSS are wait4's rusage of the client process: CPU is the client's plus that of\n")
	fmt.Fprintf(w, "every descendant it reaped before exiting (the agent: see its own row), peak RSS the largest\n")
	fmt.Fprintf(w, "of them (a maximum, not a sum), so a figure above the agent's is the client's own. Each\n")
	fmt.Fprintf(w, "process is started by a small launcher (bench/launch.go), so that its peak RSS does not start\n")
	fmt.Fprintf(w, "from the bench's own; the launcher's floor (`true` through it) is %s.\n", mb(float64(floor.maxRSS)))
	if acpxV != nil {
		fmt.Fprintf(w, "\nacpx runs `node cli.js --agent TESTAGENT --cwd DIR exec hello` (one stateless prompt) with a\n")
		fmt.Fprintf(w, "HOME of its own; it closes the agent's stdin and sends SIGTERM at once, and its figures\n")
		fmt.Fprintf(w, "include the agent only if it reaped it before exiting.\n")
	} else {
		fmt.Fprintf(w, "\n%s\n", acpxNote)
	}

	fmt.Fprintf(w, "\nWhere acpflow's wall time goes (median per phase over %d runs with `--json`; times of its\n", b.n)
	fmt.Fprintf(w, "events against the bench's clock; median wall of these runs %s):\n\n", ms(median(withEvents, wallOf)))
	phases := newTable("phase", "median", "max")
	for _, p := range []struct {
		name     string
		from, to func(int) time.Time
	}{
		{"process start → run_start (runtime, CLI, workflow)", func(i int) time.Time { return withEvents[i].begin }, func(i int) time.Time { return lines[i].runStart }},
		{"run_start → spawned (env policy, fork/exec, the run store open and the agent on record)", func(i int) time.Time { return lines[i].runStart }, func(i int) time.Time { return lines[i].spawned }},
		{"spawned → initialized", func(i int) time.Time { return lines[i].spawned }, func(i int) time.Time { return lines[i].initialized }},
		{"initialized → session", func(i int) time.Time { return lines[i].initialized }, func(i int) time.Time { return lines[i].session }},
		{"session → last chunk (prompt)", func(i int) time.Time { return lines[i].session }, func(i int) time.Time { return lines[i].answered }},
		{"last chunk → teardown done", func(i int) time.Time { return lines[i].answered }, func(i int) time.Time { return lines[i].teardown }},
		{"teardown done → run_end (step_end, store)", func(i int) time.Time { return lines[i].teardown }, func(i int) time.Time { return lines[i].runEnd }},
		{"run_end → process reaped (store close, exit)", func(i int) time.Time { return lines[i].runEnd }, func(i int) time.Time { return withEvents[i].begin.Add(withEvents[i].wall) }},
	} {
		ds := make([]sample, len(lines))
		for i := range lines {
			ds[i].wall = p.to(i).Sub(p.from(i))
		}
		phases.row(p.name, ms(median(ds, wallOf)), ms(maximum(ds, wallOf)))
	}
	phases.write(w)

	sec.target("acpflow wall ≤ 1.5× a bare client", fmt.Sprintf("%.2f× (%s vs %s)", fw/bw, ms(fw), ms(bw)), fw/bw <= 1.5)
	if acpxV != nil {
		xw, xr := median(acpxV.samples, wallOf), median(acpxV.samples, rssKiB)
		fr := median(flow.samples, rssKiB)
		sec.target("acpflow ≥ 20× less wall than acpx per turn", fmt.Sprintf("%.1f× (%s vs %s)", xw/fw, ms(xw), ms(fw)), xw/fw >= 20)
		sec.target("acpflow ≥ 3× less peak RSS than acpx", fmt.Sprintf("%.1f× (%s vs %s)", xr/fr, mb(xr), mb(fr)), xr/fr >= 3)
	} else {
		sec.target("acpflow vs acpx (wall ≥ 20×, peak RSS ≥ 3×)", acpxNote, false)
	}
	return sec
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}
