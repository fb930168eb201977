// Command bench measures acpflow against baselines in one run and prints
// the figures side by side, as medians and ratios: `go run ./bench`.
//
// Everything is built first (acpflow, the bare acp-go-sdk client, the
// no-delay test agent), then the variants run interleaved, so that a busy
// moment on the machine hurts every variant alike. acpx, the Node ACP CLI,
// joins the comparison when bench/acpx/install.sh has installed it, and
// the real agents (claude, codex, gemini against a scripted model server)
// when realagents/install.sh has installed them. Each section ends with the
// targets it is judged by; with -write the report also goes to
// bench/RESULTS.md. -only runs some sections (e.g. `-only real`).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// bench is what every section measures with.
type bench struct {
	n           int
	nReal       int      // runs per client on the real agents
	nReuse      int      // runs per reuse batch on claude (codex and gemini: 2/5 of it)
	dir         string   // scratch: binaries, workflows, the run store
	state       string   // the run store of every acpflow run (not the user's)
	acpxDir     string   // where bench/acpx/install.sh installed acpx
	nodeModules string   // where realagents/install.sh installed the real agents
	pinned      string   // where bench/pinned/install.sh installed the adapters pinned before today's
	agents      []string // the real agents to run (-agents), nil for all

	acpflow, bareclient, testagent string
}

// section is one part of the report: its text and the targets it checks.
type section struct {
	title   string
	body    strings.Builder
	targets []target
}

type target struct {
	name, measured string
	met            bool
}

func (s *section) target(name, measured string, met bool) {
	s.targets = append(s.targets, target{name, measured, met})
}

type sectionEntry struct {
	name string // what -only calls it
	run  func(*bench) *section
}

// sections run in this order, by the name -only knows them by. One that
// returns nil is left out of the report.
var sections = []sectionEntry{
	{"turn", turnSection},
	{"teardown", teardownSection},
	{"batch", batchThroughput},
	{"policy", policyDecisionCosts},
	{"real", realAgentsSection},
	{"sessions", sessionsSection},
}

// variant is one command measured repeatedly.
type variant struct {
	name    string
	cmd     command
	samples []sample
}

func main() {
	if len(os.Args) > 2 && os.Args[1] == launchArg && os.Args[2] == "--" {
		launch(os.Args[3:])
	}
	n := flag.Int("n", 30, "runs per variant")
	nReal := flag.Int("n-real", 5, "runs per client on each real agent (1–3 s each)")
	nReuse := flag.Int("n-reuse", 100, "runs per reuse batch on claude (the sessions section; 2/5 of it on codex and gemini)")
	write := flag.Bool("write", false, "also write bench/RESULTS.md")
	only := flag.String("only", "", "run only these sections, comma-separated: "+sectionNames())
	acpxDir := flag.String("acpx", filepath.Join("bench", "acpx"), "where bench/acpx/install.sh installed acpx")
	nodeModules := flag.String("realagents", filepath.Join("realagents", "node_modules"), "where realagents/install.sh installed the real agents")
	pinned := flag.String("pinned", filepath.Join("bench", "pinned", "node_modules"), "where bench/pinned/install.sh installed the adapters pinned before today's (rows beside today's in the real section)")
	agents := flag.String("agents", "", "run only these real agents in the real section, comma-separated (default: every agent internal/agentsetup knows, and the pinned adapters)")
	flag.Parse()
	run := map[string]bool{}
	for _, name := range strings.Split(*only, ",") {
		if name = strings.TrimSpace(name); name != "" {
			if !slices.ContainsFunc(sections, func(s sectionEntry) bool { return s.name == name }) {
				check(fmt.Errorf("-only: no section %q (sections: %s)", name, sectionNames()))
			}
			run[name] = true
		}
	}
	if *write && len(run) > 0 {
		check(fmt.Errorf("-write writes the whole report: drop -only"))
	}

	dir, err := os.MkdirTemp("", "acpflow-bench-")
	check(err)
	defer os.RemoveAll(dir)
	b := &bench{n: *n, nReal: *nReal, nReuse: *nReuse, dir: dir, state: filepath.Join(dir, "state.db"), acpxDir: *acpxDir, nodeModules: *nodeModules, pinned: *pinned}
	for _, name := range strings.Split(*agents, ",") {
		if name = strings.TrimSpace(name); name != "" {
			b.agents = append(b.agents, name)
		}
	}
	b.acpflow, b.bareclient, b.testagent = filepath.Join(dir, "acpflow"), filepath.Join(dir, "bareclient"), filepath.Join(dir, "testagent")
	build(b.acpflow, "./cmd/acpflow")
	build(b.bareclient, "./bench/bareclient")
	build(b.testagent, "./internal/testagent")

	date := time.Now().UTC()
	var out strings.Builder
	fmt.Fprintf(&out, "%s, %d CPUs (%s), %s, %s; median of %d runs per figure (%d on the real agents).\n",
		runtime.GOOS+"/"+runtime.GOARCH, runtime.NumCPU(), cpuModel(), runtime.Version(), date.Format("2006-01-02"), *n, *nReal)
	fmt.Fprintf(&out, "Load average (1 min) at the start: %s.\n", loadAverage())
	var targets []target
	for _, sec := range sections {
		if len(run) > 0 && !run[sec.name] {
			continue
		}
		s := sec.run(b)
		if s == nil {
			continue
		}
		fmt.Fprintf(&out, "\n## %s\n\n%s", s.title, s.body.String())
		targets = append(targets, s.targets...)
	}
	fmt.Fprintf(&out, "\n## Targets\n\n")
	t := newTable("target", "measured", "")
	for _, tg := range targets {
		verdict := "met"
		if !tg.met {
			verdict = "**not met**"
		}
		t.row(tg.name, tg.measured, verdict)
	}
	t.write(&out)
	fmt.Print(out.String())
	if *write {
		writeResults(out.String(), *n, *nReal, date)
	}
}

func sectionNames() string {
	var names []string
	for _, s := range sections {
		names = append(names, s.name)
	}
	return strings.Join(names, ",")
}

// workflow writes a workflow into the scratch directory and returns its path.
func (b *bench) workflow(name, format string, args ...any) string {
	p := filepath.Join(b.dir, name)
	check(os.WriteFile(p, []byte(fmt.Sprintf(format, args...)), 0o644))
	return p
}

// table renders a Markdown table with aligned columns.
type table struct{ rows [][]string }

func newTable(header ...string) *table {
	sep := make([]string, len(header))
	for i := range sep {
		sep[i] = "---"
	}
	return &table{rows: [][]string{header, sep}}
}

func (t *table) row(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	for _, r := range t.rows {
		fmt.Fprintf(tw, "| %s\t|\n", strings.Join(r, "\t| "))
	}
	tw.Flush()
}

func build(out, pkg string) {
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0") // as released: one static binary
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	check(cmd.Run())
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func writeResults(report string, n, nReal int, date time.Time) {
	host, _ := os.Hostname()
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	body := fmt.Sprintf("# acpflow benchmark results\n\nCommand: `go run ./bench -write -n %d -n-real %d` (from the repository root; `bash bench/acpx/install.sh` first for acpx,\n"+
		"`bash realagents/install.sh` for the real agents, `bash bench/pinned/install.sh` for the claude adapter pinned before today's).\n"+
		"Machine: host %q, Linux %s. Written %s.\n\n%s",
		n, nReal, host, strings.TrimSpace(string(kernel)), date.Format(time.RFC3339), report)
	check(os.WriteFile(filepath.Join("bench", "RESULTS.md"), []byte(body), 0o644))
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}
