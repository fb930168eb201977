package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acpflow/acpflow/internal/agentsetup"
	"github.com/acpflow/acpflow/internal/modelserver"
)

// Targets of issue 13, on claude-agent-acp.
const (
	reuseConcurrency = 4
	reuseSpeedup     = 3.0 // throughput with reuse / without
	reuseRSSRatio    = 1.5 // peak RSS of the process tree with reuse / without
	continueBudget   = 50 * time.Millisecond
	continueRounds   = 5
)

// sessionsSection measures what sessions and reuse buy on the real agents
// against the scripted model server: batches of one-step runs with and
// without `reuse: true` (claude, codex, gemini), in one run; and, on
// claude, the start of a step that continues the session of the step
// before it.
func sessionsSection(b *bench) *section {
	sec := &section{title: "Sessions and reuse (real agents)"}
	w := &sec.body
	nm, err := filepath.Abs(b.nodeModules)
	check(err)
	if _, err := os.Stat(filepath.Join(nm, ".bin")); err != nil {
		note := fmt.Sprintf("real agents: not installed in %s (`bash realagents/install.sh` first)", b.nodeModules)
		fmt.Fprintf(w, "%s\n", note)
		sec.target("reuse: batch throughput ×3, peak RSS ≤ 1.5×; continued step start ≤ 50 ms", note, false)
		return sec
	}
	srv, err := modelserver.Start(modelserver.Script{{Say: "FINAL done"}})
	check(err)
	defer srv.Close()
	setup := func(name string) agentsetup.Agent {
		home := filepath.Join(b.dir, "sessions-home-"+name)
		check(os.MkdirAll(home, 0o755))
		a, err := agentsetup.Setup(name, nm, home, srv.URL())
		check(err)
		return a
	}
	claude := setup("claude")

	// The batch on claude, fresh processes then reused ones, after a
	// warm-up; then the same on codex and gemini with fewer runs.
	loadBefore := loadAverage()
	b.reuseBatch("claude", claude, false, 2)
	type pair struct {
		agent        string
		runs         int
		fresh, reuse batchRun
	}
	var pairs []pair
	otherRuns := max(b.nReuse*2/5, 1)
	pairs = append(pairs, pair{agent: "claude", runs: b.nReuse,
		fresh: b.reuseBatch("claude", claude, false, b.nReuse), reuse: b.reuseBatch("claude", claude, true, b.nReuse)})
	for _, name := range []string{"codex", "gemini"} {
		a := setup(name)
		b.reuseBatch(name, a, false, 2)
		pairs = append(pairs, pair{agent: name, runs: otherRuns,
			fresh: b.reuseBatch(name, a, false, otherRuns), reuse: b.reuseBatch(name, a, true, otherRuns)})
	}
	loadAfter := loadAverage()
	fmt.Fprintf(w, "Batches of one-step runs (`acpflow run --inputs`, `--concurrency %d`) with each agent's preset\n", reuseConcurrency)
	fmt.Fprintf(w, "and the local binary, each turn one scripted answer without a tool call, so the agent's start\n")
	fmt.Fprintf(w, "weighs as it does against a fast model; without and with `reuse: true` on the agent, one after\n")
	fmt.Fprintf(w, "the other in this run: %d runs on claude, %d on codex and gemini. Peak RSS\n", b.nReuse, otherRuns)
	fmt.Fprintf(w, "is the largest sum of the RSS of acpflow and every process below it, sampled every 50 ms.\n")
	fmt.Fprintf(w, "Load average (1 min): %s before, %s after.\n\n", loadBefore, loadAfter)
	t := newTable("agent", "batch", "wall", "runs/s", "CPU per run", "agents spawned", "peak RSS (tree)", "failed runs", "reuse vs fresh")
	for _, p := range pairs {
		for _, r := range []batchRun{p.fresh, p.reuse} {
			ratio := ""
			if r.name == p.reuse.name {
				ratio = fmt.Sprintf("%.2f× throughput, %.2f× RSS", p.fresh.wall.Seconds()/p.reuse.wall.Seconds(), float64(p.reuse.peakRSS)/float64(p.fresh.peakRSS))
			}
			t.row(p.agent, r.name, r.wall.Round(time.Millisecond).String(), fmt.Sprintf("%.2f", float64(p.runs)/r.wall.Seconds()),
				(r.cpu / time.Duration(p.runs)).Round(time.Millisecond).String(),
				strconv.Itoa(r.spawned), fmt.Sprintf("%d MiB", r.peakRSS>>20), strconv.Itoa(r.failed), ratio)
		}
	}
	t.write(w)
	fmt.Fprintf(w, "\nclaude-agent-acp starts one Claude Code CLI process per session (its newSession calls the\n")
	fmt.Fprintf(w, "agent SDK's query(), which spawns the CLI), so reuse saves the adapter's own start but not the\n")
	fmt.Fprintf(w, "larger part of every step's start; codex and gemini keep their sessions in the process.\n\n")
	cl := pairs[0]
	speedup := cl.fresh.wall.Seconds() / cl.reuse.wall.Seconds()
	rss := float64(cl.reuse.peakRSS) / float64(cl.fresh.peakRSS)
	sec.target(fmt.Sprintf("reuse on claude: %d runs at --concurrency %d, throughput ≥ %.0f× without", b.nReuse, reuseConcurrency, reuseSpeedup),
		fmt.Sprintf("%.2f× (%s vs %s)", speedup, cl.reuse.wall.Round(time.Millisecond), cl.fresh.wall.Round(time.Millisecond)),
		speedup >= reuseSpeedup && cl.fresh.failed == 0 && cl.reuse.failed == 0)
	sec.target(fmt.Sprintf("reuse on claude: peak RSS ≤ %.1f× the fresh-process batch", reuseRSSRatio),
		fmt.Sprintf("%.2f× (%d MiB vs %d MiB)", rss, cl.reuse.peakRSS>>20, cl.fresh.peakRSS>>20), rss <= reuseRSSRatio)

	// A two-step workflow whose second step continues the first.
	var first, second []sample
	for i := 0; i < continueRounds; i++ {
		f, s, err := b.continuedStart(claude, i)
		if err != nil {
			fmt.Fprintf(os.Stderr, "sessions: continuation round %d: %v\n", i, err)
			continue
		}
		first, second = append(first, sample{wall: f}), append(second, sample{wall: s})
	}
	fmt.Fprintf(w, "A two-step workflow on claude whose second step has `session: first`: each step's start, from\n")
	fmt.Fprintf(w, "its step_start event to its session event (after which the prompt is written), median / max of %d\n", continueRounds)
	fmt.Fprintf(w, "runs. The first step spawns the agent (spawn, initialize, session/new); the second continues the\n")
	fmt.Fprintf(w, "first's session on the same live process.\n\n")
	c := newTable("step", "start (step_start → session)")
	c.row("first (spawn + handshake)", medMax(first))
	c.row("second (session: first)", medMax(second))
	c.write(w)
	med := time.Duration(median(second, wallOf))
	sec.target(fmt.Sprintf("continued step: start ≤ %s", continueBudget), medMax(second), len(second) > 0 && med <= continueBudget)
	return sec
}

// batchRun is one measured batch.
type batchRun struct {
	name            string
	wall            time.Duration
	cpu             time.Duration // user + system of acpflow and every process it and they waited for
	spawned, failed int
	peakRSS         int64 // bytes
}

// reuseBatch runs n one-step runs on a at reuseConcurrency, with or
// without reuse, sampling the process tree's RSS.
func (b *bench) reuseBatch(preset string, a agentsetup.Agent, reuse bool, n int) batchRun {
	name := "fresh processes"
	if reuse {
		name = "reuse: true"
	}
	dir, err := os.MkdirTemp(b.dir, "reuse-")
	check(err)
	defer os.RemoveAll(dir)
	wf := filepath.Join(dir, "wf.yaml")
	check(os.WriteFile(wf, []byte(fmt.Sprintf(`name: reuse
inputs:
  n: {type: number}
agents:
  a:
    preset: %s
    command: %q
    env: %s
    reuse: %t
%spolicies:
  permission: allow
steps:
  - {id: s, uses: acp-subagent, with: {agent: a, prompt: "Say done (${{ inputs.n }})"}}
`, preset, a.Command, envJSON(a, "sessions"), reuse, agentYAMLOf(a))), 0o644))
	var lines strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&lines, "{\"n\": %d}\n", i)
	}
	inputs := filepath.Join(dir, "inputs.jsonl")
	check(os.WriteFile(inputs, []byte(lines.String()), 0o644))
	cmd := exec.Command(b.acpflow, "run", wf, "--inputs", inputs, "--concurrency", strconv.Itoa(reuseConcurrency),
		"--json", "--workspace", dir, "--state", filepath.Join(dir, "state.db"))
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout = &out
	begin := time.Now()
	check(cmd.Start())
	stop := make(chan struct{})
	var peak int64
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			if rss := treeRSS(cmd.Process.Pid); rss > peak {
				peak = rss
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
	err = cmd.Wait()
	wall := time.Since(begin)
	close(stop)
	wg.Wait()
	r := batchRun{name: name, wall: wall, peakRSS: peak}
	if st := cmd.ProcessState; st != nil {
		r.cpu = st.UserTime() + st.SystemTime()
	}
	sc := bufio.NewScanner(&out)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e struct{ Type, Kind, Status, Step, Error string }
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		if e.Kind == "spawned" {
			r.spawned++
		}
		if e.Type == "step_end" && e.Status != "succeeded" {
			// Said, so that a failure in a measured batch can be looked into.
			fmt.Fprintf(os.Stderr, "sessions: %s %s batch: step %s %s: %s\n", preset, name, e.Step, e.Status, e.Error)
		}
		if e.Type == "run_end" && e.Status != "succeeded" {
			r.failed++
		}
	}
	if err != nil && r.failed == 0 {
		r.failed = -1
		fmt.Fprintf(os.Stderr, "sessions: %s batch: %v\n", name, err)
	}
	return r
}

// continuedStart runs the two-step workflow once and returns each step's
// start (step_start → session).
func (b *bench) continuedStart(a agentsetup.Agent, round int) (first, second time.Duration, err error) {
	dir, err := os.MkdirTemp(b.dir, "continue-")
	check(err)
	defer os.RemoveAll(dir)
	wf := filepath.Join(dir, "wf.yaml")
	check(os.WriteFile(wf, []byte(fmt.Sprintf(`name: continue
agents:
  a:
    preset: claude
    command: %q
    env: %s
%spolicies:
  permission: allow
steps:
  - {id: first, uses: acp-subagent, with: {agent: a, prompt: "Remember the number %d"}}
  - {id: second, needs: [first], uses: acp-subagent, with: {agent: a, prompt: "Which number?", session: first}}
`, a.Command, envJSON(a, "continue"), agentYAMLOf(a), round)), 0o644))
	c := command{argv: []string{b.acpflow, "run", wf, "--json", "--timeout", "120s", "--workspace", dir, "--state", filepath.Join(dir, "state.db")},
		dir: dir, capture: true}
	s, err := c.measure()
	if err != nil {
		return 0, 0, fmt.Errorf("%v\n%s", err, tail(string(s.stdout), 5))
	}
	var starts, sessions = map[string]time.Time{}, map[string]time.Time{}
	sc := bufio.NewScanner(bytes.NewReader(s.stdout))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e struct {
			Type, Kind, Step, Via string
			Time                  time.Time
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		switch {
		case e.Type == "step_start":
			starts[e.Step] = e.Time
		case e.Kind == "session":
			sessions[e.Step] = e.Time
			if e.Step == "second" && e.Via != "continued" {
				return 0, 0, fmt.Errorf("the second step's session came %q, not continued", e.Via)
			}
		}
	}
	if sessions["first"].IsZero() || sessions["second"].IsZero() {
		return 0, 0, fmt.Errorf("a step has no session event")
	}
	return sessions["first"].Sub(starts["first"]), sessions["second"].Sub(starts["second"]), nil
}

// envJSON is the agent's env with the bench's mark, as a YAML flow map.
func envJSON(a agentsetup.Agent, mark string) string {
	env := map[string]string{realMarkVar: fmt.Sprintf("bench%d/%s/", os.Getpid(), mark)}
	for _, kv := range a.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	j, err := json.Marshal(env)
	check(err)
	return string(j)
}

// agentYAMLOf is the agent's extra YAML keys, indented under the agent.
func agentYAMLOf(a agentsetup.Agent) string {
	if y := a.YAML(); y != "" {
		return "    " + y + "\n"
	}
	return ""
}

// treeRSS is the summed RSS (bytes) of pid and every process below it.
func treeRSS(pid int) int64 {
	children := map[int][]int{}
	rss := map[int]int64{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 22 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		pages, _ := strconv.ParseInt(f[21], 10, 64)
		children[ppid] = append(children[ppid], p)
		rss[p] = pages * int64(os.Getpagesize())
	}
	var sum int64
	stack := []int{pid}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		sum += rss[p]
		stack = append(stack, children[p]...)
	}
	return sum
}
