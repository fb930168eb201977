package main

import (
	"fmt"
	"time"
)

// Graces of the stubborn agents' ladder: small, so that the runs are short
// and the overhead on top of them shows.
const (
	benchEOFGrace  = 200 * time.Millisecond
	benchTermGrace = 200 * time.Millisecond
)

// teardownSection measures the teardown ladder on three agents: one that
// exits as soon as its stdin closes, one that ignores EOF but not SIGTERM,
// and one that ignores both, so that only SIGKILL ends it. Each is timed
// from the prompt's answer (its last message chunk) by acpflow's own
// events, whose times have nanosecond resolution.
func teardownSection(b *bench) *section {
	agents := []struct {
		name, args string
		budget     time.Duration // the target: how long the whole teardown may take
		tier       string        // where the ladder should end
	}{
		{"exits on EOF (`-eof-flush 0`)", `[-eof-flush, "0"]`, 20 * time.Millisecond, "eof"},
		{"ignores EOF, exits on SIGTERM (`-ignore-eof`)", `[-ignore-eof]`, benchEOFGrace + 100*time.Millisecond, "term"},
		{"ignores EOF and SIGTERM (`-ignore-eof -trap-term`)", `[-ignore-eof, -trap-term]`, benchEOFGrace + benchTermGrace + 100*time.Millisecond, "kill"},
	}
	type series struct {
		total, overEnd []sample // answer → teardown event; answer → step_end
		tiers          map[string]int
		reportedMS     []sample // the teardown event's own duration_ms
	}
	all := make([]series, len(agents))
	cmds := make([]command, len(agents))
	for i, a := range agents {
		wf := b.workflow(fmt.Sprintf("teardown-%d.yaml", i), `name: teardown
agents:
  a:
    command: %s
    args: %s
    dispose: {eof-grace: %s, term-grace: %s}
steps:
  - id: one
    uses: acp-subagent
    with: {agent: a, prompt: hello}
`, b.testagent, a.args, benchEOFGrace, benchTermGrace)
		cmds[i] = command{argv: []string{b.acpflow, "run", wf, "--json", "--workspace", b.dir, "--state", b.state}, dir: b.dir}
		all[i].tiers = map[string]int{}
	}
	for i := 0; i < b.n; i++ {
		for j := range agents {
			_, t := runTimeline(cmds[j])
			s := &all[j]
			s.total = append(s.total, sample{wall: t.teardown.Sub(t.answered)})
			s.overEnd = append(s.overEnd, sample{wall: t.stepEnd.Sub(t.answered)})
			s.reportedMS = append(s.reportedMS, sample{wall: time.Duration(t.teardownMS) * time.Millisecond})
			s.tiers[t.tier]++
		}
	}

	sec := &section{title: "Teardown"}
	w := &sec.body
	fmt.Fprintf(w, "From the prompt's answer (the last agent_message_chunk event) to the teardown event and to\n")
	fmt.Fprintf(w, "step_end, by the times of acpflow's `--json` events; %d runs each, dispose graces eof %s,\n", b.n, benchEOFGrace)
	fmt.Fprintf(w, "term %s. For the agent that exits on EOF this bounds, from above, the time from its exit\n", benchTermGrace)
	fmt.Fprintf(w, "to the step's end: it also holds the stdin close and the agent's own exit.\n\n")
	t := newTable("agent", "tier", "→ teardown done (median / max)", "→ step_end (median / max)", "duration_ms (median)", "over the graces")
	for j, a := range agents {
		s := all[j]
		graces := time.Duration(0)
		switch a.tier {
		case "term":
			graces = benchEOFGrace
		case "kill":
			graces = benchEOFGrace + benchTermGrace
		}
		tiers := ""
		for tier, n := range s.tiers {
			if tiers != "" {
				tiers += ", "
			}
			tiers += fmt.Sprintf("%s×%d", tier, n)
		}
		t.row(a.name, tiers,
			ms(median(s.total, wallOf))+" / "+ms(maximum(s.total, wallOf)),
			ms(median(s.overEnd, wallOf))+" / "+ms(maximum(s.overEnd, wallOf)),
			ms(median(s.reportedMS, wallOf)),
			ms(median(s.total, wallOf)-float64(graces)))
		// A cooperative exit is done when the step has ended; a stubborn
		// child when the ladder has seen it gone.
		measured := s.total
		if a.tier == "eof" {
			measured = s.overEnd
		}
		worst := time.Duration(maximum(measured, wallOf))
		budget := ms(float64(a.budget))
		name := fmt.Sprintf("a child that exits on SIGTERM gone ≤ eof + 100 ms (%s)", budget)
		if a.tier == "eof" {
			name = fmt.Sprintf("a cooperative exit reaped, step ended ≤ %s", budget)
		} else if a.tier == "kill" {
			name = fmt.Sprintf("a stubborn child gone ≤ eof + term + 100 ms (%s)", budget)
		}
		sec.target(name, fmt.Sprintf("max %s, median %s (tier %s)", ms(float64(worst)), ms(median(measured, wallOf)), tiers),
			worst <= a.budget && s.tiers[a.tier] == b.n)
	}
	t.write(w)
	return sec
}
