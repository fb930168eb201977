package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/acpflow/acpflow/internal/agentsetup"
	"github.com/acpflow/acpflow/internal/modelserver"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// The turn every real agent plays: one shell command (allowed by
// `permission: allow`, so it reaches the policy and runs), then a final
// answer.
var (
	realScript = modelserver.Script{
		{Say: "Running it.", Shell: "echo bench > bench.txt"},
		{Say: "FINAL done"},
	}
	realPrompt = "Run the script."
	realOutput = "bench.txt" // what the shell command leaves in the workspace
)

// Targets of issue 10 on the real agents.
const (
	realSettleBudget = 20 * time.Millisecond  // turn_end → step_end
	realExitBudget   = 300 * time.Millisecond // turn_end → acpflow reaped
	realWallRatio    = 1.3                    // acpflow's wall / the bare client's
)

// realMarkVar is in every real agent's explicit env; its descendants
// inherit it, so that a process left behind is found even when it renamed
// itself or left the group. Not ACPFLOW_*: acpflow keeps those from its
// children.
const realMarkVar = "BENCH_REALAGENTS_MARK"

// realRun is one measured turn on a real agent, by either client.
type realRun struct {
	sample
	flow     timeline   // acpflow's events
	bare     turnPhases // the bare client's phases
	leftover int        // processes with the run's mark still alive after it, killed by the bench
}

// turnPhases is what `bareclient -phases` prints (bench/bareclient).
type turnPhases struct {
	Spawned, Initialized, Authenticated, Session, Answered, Reaped int64
	StopReason                                                     string `json:"stop_reason"`
	Permissions                                                    int
}

func at(ns int64) time.Time { return time.Unix(0, ns) }

// realSeries is one agent's runs: one installed release of it.
type realSeries struct {
	name        string // the agent, as agentsetup and the presets know it
	key         string // unique among the series: name, or name-pinned
	label       string // what the tables say: the package's name and version
	nodeModules string // where it is installed
	preset      acpagent.Preset
	flow        []realRun
	bare        []realRun
	failures    []string
}

// realPackages are the npm packages of today's agents (realagents/package.json),
// and pinnedPackages those of the adapters realagents pinned before them
// (bench/pinned/package.json), which the bench runs beside today's with the
// same presets (issue 28).
var (
	realPackages = map[string]string{
		"claude":   "@agentclientprotocol/claude-agent-acp",
		"codex":    "@agentclientprotocol/codex-acp",
		"gemini":   "@google/gemini-cli",
		"opencode": "opencode-ai",
		"qwen":     "@qwen-code/qwen-code",
	}
	// codex-acp 0.16.0 is not among them: it needs the codex preset of
	// its day (auth codex-api-key, approval and sandbox args, a prompt
	// rule in HOME), and today's would neither authenticate it nor make it
	// ask (bench/pinned/install.sh).
	pinnedPackages = map[string]string{
		"claude": "@zed-industries/claude-agent-acp",
	}
)

// packageLabel is "PACKAGE VERSION" as installed in nodeModules, or the
// agent's name when its package is unknown or not there.
func packageLabel(name, pkg, nodeModules string) string {
	var meta struct{ Version string }
	b, err := os.ReadFile(filepath.Join(nodeModules, pkg, "package.json"))
	if pkg == "" || err != nil || json.Unmarshal(b, &meta) != nil || meta.Version == "" {
		return name
	}
	return pkg + " " + meta.Version
}

// realSeriesOf are the series the section runs: every agent agentsetup
// knows (or those of -agents) from realagents/node_modules, then the
// pinned adapters from bench/pinned/node_modules where installed.
func (b *bench) realSeriesOf(nm string) []*realSeries {
	for _, name := range b.agents {
		if !slices.Contains(agentsetup.Names(), name) {
			check(fmt.Errorf("-agents: no agent %q (known: %s)", name, strings.Join(agentsetup.Names(), ", ")))
		}
	}
	wanted := func(name string) bool { return len(b.agents) == 0 || slices.Contains(b.agents, name) }
	var series []*realSeries
	for _, name := range agentsetup.Names() {
		if !wanted(name) {
			continue
		}
		p, ok := acpagent.LookupPreset(name)
		if !ok {
			check(fmt.Errorf("no preset %q", name))
		}
		series = append(series, &realSeries{name: name, key: name, label: packageLabel(name, realPackages[name], nm), nodeModules: nm, preset: p})
	}
	pinned, err := filepath.Abs(b.pinned)
	check(err)
	if _, err := os.Stat(filepath.Join(pinned, ".bin")); err != nil {
		fmt.Fprintf(os.Stderr, "real agents: the pinned adapters are not installed in %s (`bash bench/pinned/install.sh`): today's only\n", b.pinned)
		return series
	}
	for _, name := range slices.Sorted(maps.Keys(pinnedPackages)) {
		if !wanted(name) {
			continue
		}
		p, _ := acpagent.LookupPreset(name)
		series = append(series, &realSeries{name: name, key: name + "-pinned", label: packageLabel(name, pinnedPackages[name], pinned) + " (pinned before)", nodeModules: pinned, preset: p})
	}
	return series
}

// realAgentsSection runs one turn on each real agent (claude-agent-acp,
// codex-acp, gemini-cli, as installed by realagents/install.sh) against
// the scripted model server, through `acpflow run` with the agent's preset
// and beside the bare client that SIGKILLs the agent at the answer (the
// limit), interleaved, each run with a fresh HOME and workspace.
func realAgentsSection(b *bench) *section {
	sec := &section{title: "Real agents, one turn"}
	w := &sec.body
	nm, err := filepath.Abs(b.nodeModules)
	check(err)
	if _, err := os.Stat(filepath.Join(nm, ".bin")); err != nil {
		note := fmt.Sprintf("real agents: not installed in %s (`bash realagents/install.sh` first)", b.nodeModules)
		fmt.Println(note)
		fmt.Fprintf(w, "%s\n", note)
		sec.target("real agents: settle, exit after the turn, wall vs bare", note, false)
		return sec
	}
	srv, err := modelserver.Start(realScript)
	check(err)
	defer srv.Close()

	loadBefore := loadAverage()
	series := b.realSeriesOf(nm)
	// The first run of each is a warm-up (node's modules into the page
	// cache); it must succeed, and is not counted.
	for _, s := range series {
		for _, bare := range []bool{true, false} {
			if _, err := b.realTurn(s, "warm", bare, srv.URL()); err != nil {
				check(fmt.Errorf("real agents: warm-up of %s: %v", s.label, err))
			}
		}
	}
	for i := 0; i < b.nReal; i++ {
		fmt.Fprintf(os.Stderr, "real agents: round %d of %d\n", i+1, b.nReal)
		for _, s := range series {
			// Alternate which client goes first, so neither always runs
			// on the other's leftovers (page cache, a busy CPU).
			for _, bare := range []bool{i%2 == 0, i%2 != 0} {
				r, err := b.realTurn(s, strconv.Itoa(i), bare, srv.URL())
				switch {
				case err != nil:
					s.failures = append(s.failures, err.Error())
					fmt.Fprintf(os.Stderr, "real agents: %s: %v\n", s.label, err)
				case bare:
					s.bare = append(s.bare, r)
				default:
					s.flow = append(s.flow, r)
				}
			}
		}
	}
	loadAfter := loadAverage()
	left := realSurvivors("bench" + strconv.Itoa(os.Getpid()) + "/")
	killPids(left)

	var labels []string
	for _, s := range series {
		labels = append(labels, s.label)
	}
	fmt.Fprintf(w, "One turn of each real agent (%s) against the scripted model server (internal/modelserver, in the bench's\n", strings.Join(labels, ", "))
	fmt.Fprintf(w, "process): the model asks for one shell command (`%s`), which `permission: allow`\n", realScript[0].Shell)
	fmt.Fprintf(w, "lets run, then answers. acpflow runs a one-step workflow with `preset: NAME` and `command:` the\n")
	fmt.Fprintf(w, "local binary, so the preset's args, env and ladder apply; the bare client (bench/bareclient\n")
	fmt.Fprintf(w, "`-auth -allow -kill`) does the same turn and SIGKILLs the agent's process group as soon as the\n")
	fmt.Fprintf(w, "prompt's answer arrives: the limit. Each run has a fresh HOME and workspace\n")
	fmt.Fprintf(w, "(internal/agentsetup); median of %d runs per client, interleaved, after one warm-up each.\n", b.nReal)
	fmt.Fprintf(w, "Load average (1 min): %s before, %s after.\n\n", loadBefore, loadAfter)

	t := newTable("agent", "client", "wall (median / max)", "→ spawned", "start (spawned → session)", "turn (session → answer)", "answer → exit", "wall vs bare")
	for _, s := range series {
		if len(s.flow) == 0 || len(s.bare) == 0 {
			continue
		}
		bw := median(samples(s.bare), wallOf)
		for _, c := range []struct {
			name string
			runs []realRun
			// spawned, session, answer of one run
			marks func(realRun) (time.Time, time.Time, time.Time)
		}{
			{"bare client (kill at answer)", s.bare, func(r realRun) (time.Time, time.Time, time.Time) {
				return at(r.bare.Spawned), at(r.bare.Session), at(r.bare.Answered)
			}},
			{"acpflow run, preset " + s.name, s.flow, func(r realRun) (time.Time, time.Time, time.Time) {
				return r.flow.spawned, r.flow.session, r.flow.turnEnd
			}},
		} {
			var toSpawn, start, turn, after []sample
			for _, r := range c.runs {
				spawned, session, answer := c.marks(r)
				toSpawn = append(toSpawn, span(r.begin, spawned))
				start = append(start, span(spawned, session))
				turn = append(turn, span(session, answer))
				after = append(after, span(answer, r.begin.Add(r.wall)))
			}
			wall := median(samples(c.runs), wallOf)
			t.row(s.label, c.name, ms(wall)+" / "+ms(maximum(samples(c.runs), wallOf)), ms(median(toSpawn, wallOf)),
				ms(median(start, wallOf)), ms(median(turn, wallOf)), ms(median(after, wallOf)), fmt.Sprintf("%.2f×", wall/bw))
		}
	}
	t.write(w)
	fmt.Fprintf(w, "\nTimes are acpflow's `--json` events (spawned, session, turn_end) and the bare client's own\n")
	fmt.Fprintf(w, "clock (`-phases`) against the bench's (the launcher's fork and reap). \"→ spawned\" is from the\n")
	fmt.Fprintf(w, "fork of the client to the agent's; \"start\" includes authenticate (codex, gemini); \"turn\" runs\n")
	fmt.Fprintf(w, "from the session to the prompt's answer (acpflow: turn_end), the model server's replies and the\n")
	fmt.Fprintf(w, "permission request included; \"answer → exit\" is until the client process was reaped.\n\n")

	fmt.Fprintf(w, "The end of acpflow's step, from turn_end (median / max):\n\n")
	e := newTable("agent", "ladder (preset)", "settle (→ step_end)", "teardown (→ teardown event)", "of which the ladder", "tier", "exit (→ acpflow reaped)")
	for _, s := range series {
		if len(s.flow) == 0 {
			continue
		}
		settle, teardown, exit := s.ends()
		var ladder []sample
		for _, r := range s.flow {
			ladder = append(ladder, sample{wall: time.Duration(r.flow.teardownMS) * time.Millisecond})
		}
		e.row(s.label, ladderOf(s.preset), medMax(settle), medMax(teardown), medMax(ladder), s.tiers(), medMax(exit))
	}
	e.write(w)
	fmt.Fprintf(w, "\nsettle is the step's record and step_end after the turn; teardown (session/close where the agent\n")
	fmt.Fprintf(w, "offers it, then the ladder: stdin closed, eof-grace, SIGTERM, term-grace, SIGKILL) runs in the\n")
	fmt.Fprintf(w, "background, and acpflow exits when it is done. \"of which the ladder\" is the teardown event's\n")
	fmt.Fprintf(w, "duration_ms (whole milliseconds); the rest of the teardown is session/close.\n")

	var failed []string
	leftovers := len(left)
	for _, s := range series {
		for _, f := range s.failures {
			failed = append(failed, s.label+": "+firstLine(f))
		}
		for _, r := range append(slices.Clone(s.flow), s.bare...) {
			leftovers += r.leftover
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(w, "\nFailed runs (left out of the figures): %d\n\n", len(failed))
		for _, f := range failed {
			fmt.Fprintf(w, "- %s\n", f)
		}
	}

	for _, s := range series {
		if len(s.flow) == 0 || len(s.bare) == 0 {
			sec.target(s.label+": settle, exit after the turn, wall vs bare", "no successful run", false)
			continue
		}
		settle, _, exit := s.ends()
		worst := time.Duration(maximum(settle, wallOf))
		sec.target(fmt.Sprintf("%s: a step settles ≤ %s after its turn ends", s.label, ms(float64(realSettleBudget))),
			"max "+ms(float64(worst))+", median "+ms(median(settle, wallOf)), worst <= realSettleBudget)
		worst = time.Duration(maximum(exit, wallOf))
		sec.target(fmt.Sprintf("%s: acpflow run exits ≤ %s after its turn", s.label, ms(float64(realExitBudget))),
			"max "+ms(float64(worst))+", median "+ms(median(exit, wallOf))+" (tier "+s.tiers()+")", worst <= realExitBudget)
		fw, bw := median(samples(s.flow), wallOf), median(samples(s.bare), wallOf)
		sec.target(fmt.Sprintf("%s: acpflow wall ≤ %.1f× the bare client's", s.label, realWallRatio),
			fmt.Sprintf("%.2f× (%s vs %s)", fw/bw, ms(fw), ms(bw)), fw/bw <= realWallRatio)
	}
	sec.target("real agents: every run succeeded, nothing left running",
		fmt.Sprintf("%d failed, %d processes left", len(failed), leftovers), len(failed) == 0 && leftovers == 0)
	return sec
}

// ends are acpflow's settle, teardown and exit after turn_end, per run.
func (s *realSeries) ends() (settle, teardown, exit []sample) {
	for _, r := range s.flow {
		settle = append(settle, span(r.flow.turnEnd, r.flow.stepEnd))
		teardown = append(teardown, span(r.flow.turnEnd, r.flow.teardown))
		exit = append(exit, span(r.flow.turnEnd, r.begin.Add(r.wall)))
	}
	return settle, teardown, exit
}

// tiers counts where acpflow's ladder ended: "eof×5".
func (s *realSeries) tiers() string {
	n := map[string]int{}
	for _, r := range s.flow {
		n[r.flow.tier]++
	}
	var out []string
	for _, t := range slices.Sorted(maps.Keys(n)) {
		out = append(out, fmt.Sprintf("%s×%d", t, n[t]))
	}
	return strings.Join(out, ", ")
}

func ladderOf(p acpagent.Preset) string {
	return fmt.Sprintf("eof %s, term %s", p.EOFGrace, p.TermGrace)
}

func medMax(ss []sample) string { return ms(median(ss, wallOf)) + " / " + ms(maximum(ss, wallOf)) }

func span(from, to time.Time) sample { return sample{wall: to.Sub(from)} }

func samples(rs []realRun) []sample {
	out := make([]sample, len(rs))
	for i, r := range rs {
		out[i] = r.sample
	}
	return out
}

// realTurn runs one turn on s's agent through the bare client or acpflow,
// in a directory of its own (HOME and workspace), removed afterwards, and
// checks that the turn did what the script asked.
func (b *bench) realTurn(s *realSeries, round string, bare bool, modelURL string) (realRun, error) {
	client := "acpflow"
	if bare {
		client = "bare"
	}
	dir := filepath.Join(b.dir, "real", s.key+"-"+client+"-"+round)
	home, work := filepath.Join(dir, "home"), filepath.Join(dir, "work")
	for _, d := range []string{home, work} {
		check(os.MkdirAll(d, 0o755))
	}
	defer os.RemoveAll(dir)
	a, err := agentsetup.Setup(s.name, s.nodeModules, home, modelURL)
	check(err)
	mark := fmt.Sprintf("bench%d/%s/%s/%s", os.Getpid(), s.key, client, round)
	var r realRun
	if bare {
		r, err = b.bareTurn(s.preset, a, mark, dir, work)
	} else {
		r, err = b.flowTurn(s.preset, a, mark, dir, work)
	}
	// The group is gone once the client is; anything else with the mark
	// escaped it.
	left := realSurvivors(mark)
	for tries := 0; len(left) > 0 && tries < 10; tries++ {
		time.Sleep(20 * time.Millisecond)
		left = realSurvivors(mark)
	}
	killPids(left)
	r.leftover = len(left)
	if err != nil {
		return r, fmt.Errorf("%s: %w", client, err)
	}
	if got, err := os.ReadFile(filepath.Join(work, realOutput)); err != nil || string(got) != "bench\n" {
		return r, fmt.Errorf("%s: the shell command did not run (%s: %q, %v)", client, realOutput, got, err)
	}
	return r, nil
}

// flowTurn runs the one-step workflow with `preset:` and the local command.
func (b *bench) flowTurn(p acpagent.Preset, a agentsetup.Agent, mark, dir, work string) (realRun, error) {
	env := map[string]string{realMarkVar: mark}
	for _, kv := range a.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	envJSON, err := json.Marshal(env)
	check(err)
	agentYAML := ""
	if y := a.YAML(); y != "" {
		agentYAML = "    " + y + "\n"
	}
	wf := filepath.Join(dir, "real.yaml")
	check(os.WriteFile(wf, []byte(fmt.Sprintf(`name: real-%s
agents:
  a:
    preset: %s
    command: %q
    env: %s
%spolicies:
  permission: allow
steps:
  - id: s
    uses: acp-subagent
    with: {agent: a, prompt: %q}
`, p.Name, p.Name, a.Command, envJSON, agentYAML, realPrompt)), 0o644))
	c := command{argv: []string{b.acpflow, "run", wf, "--json", "--timeout", "120s", "--workspace", work, "--state", b.state},
		dir: work, capture: true}
	s, err := c.measure()
	if err != nil {
		return realRun{sample: s}, fmt.Errorf("%v\n%s", err, tail(string(s.stdout), 5))
	}
	es, err := parseEvents(s.stdout)
	if err != nil {
		return realRun{sample: s}, err
	}
	t, err := timelineOf(es)
	if err == nil && t.turnEnd.IsZero() {
		err = fmt.Errorf("no turn_end event")
	}
	if err == nil && (t.status != "succeeded" || t.stopReason != "completed") {
		err = fmt.Errorf("step %s, turn %s: %s", t.status, t.stopReason, t.stepError)
	}
	return realRun{sample: s, flow: t}, err
}

// bareTurn runs the same turn through the bare client: the preset's args
// and env as acpflow would give them, the agent killed at the answer.
func (b *bench) bareTurn(p acpagent.Preset, a agentsetup.Agent, mark, dir, work string) (realRun, error) {
	// The preset's private files, where its args and env name them, as
	// acpflow writes them for each spawn (steps/acpsubagent/presetdir.go).
	presetDir := filepath.Join(dir, "preset")
	check(os.MkdirAll(presetDir, 0o700))
	for name, content := range p.Files {
		check(os.WriteFile(filepath.Join(presetDir, name), []byte(strings.ReplaceAll(content, acpagent.PresetDirVar, presetDir)), 0o600))
	}
	expand := func(v string) string { return strings.ReplaceAll(v, acpagent.PresetDirVar, presetDir) }
	argv := []string{b.bareclient, "-allow", "-kill", "-phases", "-timeout", "120s", "-prompt", realPrompt}
	if a.Auth != "" {
		argv = append(argv, "-auth", a.Auth)
	}
	if p.Meta != nil {
		meta, err := json.Marshal(p.Meta)
		check(err)
		argv = append(argv, "-meta", string(meta))
	}
	// The preset's own args, as acpflow keeps them with `preset:` and a
	// command of the file's own.
	argv = append(argv, "--", a.Command)
	for _, arg := range p.Args {
		argv = append(argv, expand(arg))
	}
	env := append(os.Environ(), a.Env...)
	for _, k := range slices.Sorted(maps.Keys(p.SetEnv)) {
		env = append(env, k+"="+expand(p.SetEnv[k]))
	}
	env = append(env, realMarkVar+"="+mark)
	s, err := command{argv: argv, env: env, dir: work, capture: true}.measure()
	if err != nil {
		return realRun{sample: s}, err
	}
	var ph turnPhases
	if err := json.Unmarshal(s.stdout, &ph); err != nil {
		return realRun{sample: s}, fmt.Errorf("bareclient -phases: %v in %q", err, s.stdout)
	}
	if ph.StopReason != "end_turn" || ph.Permissions == 0 {
		return realRun{sample: s, bare: ph}, fmt.Errorf("stop reason %q after %d permission requests", ph.StopReason, ph.Permissions)
	}
	return realRun{sample: s, bare: ph}, nil
}

// realSurvivors are the live processes whose environment holds
// realMarkVar with a value starting with prefix.
func realSurvivors(prefix string) []int {
	ents, _ := os.ReadDir("/proc")
	needle := []byte(realMarkVar + "=" + prefix)
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !containsVar(env, needle) {
			continue
		}
		if stat, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil {
			// The state follows the command's closing parenthesis: a
			// zombie is gone already, only not yet reaped by its parent.
			if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X') {
				continue
			}
		}
		pids = append(pids, pid)
	}
	return pids
}

// containsVar reports whether a NUL-separated environment has an entry
// starting with kv.
func containsVar(environ, kv []byte) bool {
	for _, e := range strings.Split(string(environ), "\x00") {
		if strings.HasPrefix(e, string(kv)) {
			return true
		}
	}
	return false
}

func killPids(pids []int) {
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// loadAverage is the 1-minute load average, from /proc/loadavg.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "unknown"
	}
	return f[0]
}
