// Command bench measures acpflow against baselines in one run and prints
// the figures side by side, as medians and ratios: `go run ./bench`.
//
// Everything is built first (acpflow, the bare acp-go-sdk client, the
// no-delay test agent), then the variants run interleaved, so that a busy
// moment on the machine hurts every variant alike. With -write the table
// also goes to bench/RESULTS.md.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// sample is one measured process.
type sample struct {
	wall   time.Duration
	cpu    time.Duration // user + system of the measured process itself
	maxRSS int64         // KiB
}

// variant is one command measured repeatedly.
type variant struct {
	name    string
	argv    []string
	samples []sample
}

func main() {
	n := flag.Int("n", 30, "runs per variant")
	write := flag.Bool("write", false, "also write bench/RESULTS.md")
	flag.Parse()

	dir, err := os.MkdirTemp("", "acpflow-bench-")
	check(err)
	defer os.RemoveAll(dir)
	bin := func(name string) string { return filepath.Join(dir, name) }
	build(bin("acpflow"), "./cmd/acpflow")
	build(bin("bareclient"), "./bench/bareclient")
	build(bin("testagent"), "./internal/testagent")

	wf := filepath.Join(dir, "one-step.yaml")
	check(os.WriteFile(wf, []byte(fmt.Sprintf(`name: bench
agents:
  fast:
    command: %s
steps:
  - id: one
    uses: acp-subagent
    with:
      agent: fast
      prompt: hello
`, bin("testagent"))), 0o644))

	variants := []*variant{
		{name: "bare acp-go-sdk client", argv: []string{bin("bareclient"), "--", bin("testagent")}},
		{name: "acpflow run (1 step)", argv: []string{bin("acpflow"), "run", wf, "--workspace", dir}},
	}
	for _, v := range variants { // warm the page cache
		measure(v.argv)
	}
	for i := 0; i < *n; i++ {
		for _, v := range variants {
			v.samples = append(v.samples, measure(v.argv))
		}
	}

	var out strings.Builder
	report(&out, variants, *n)
	fmt.Print(out.String())
	if *write {
		writeResults(out.String())
	}
}

func report(w io.Writer, vs []*variant, n int) {
	base := vs[0]
	fmt.Fprintf(w, "One ACP turn against a no-delay agent, median of %d runs each (%s, %d CPUs, %s)\n\n",
		n, runtime.GOOS+"/"+runtime.GOARCH, runtime.NumCPU(), time.Now().UTC().Format("2006-01-02"))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "| variant\t| wall\t| CPU\t| peak RSS\t| wall ratio\t| wall delta\t|")
	fmt.Fprintln(tw, "|---\t|---\t|---\t|---\t|---\t|---\t|")
	bw := median(base.samples, func(s sample) float64 { return float64(s.wall) })
	for _, v := range vs {
		wall := median(v.samples, func(s sample) float64 { return float64(s.wall) })
		cpu := median(v.samples, func(s sample) float64 { return float64(s.cpu) })
		rss := median(v.samples, func(s sample) float64 { return float64(s.maxRSS) })
		fmt.Fprintf(tw, "| %s\t| %.1f ms\t| %.1f ms\t| %.1f MB\t| %.2f×\t| %+.1f ms\t|\n", v.name,
			wall/1e6, cpu/1e6, rss/1024, wall/bw, (wall-bw)/1e6)
	}
	tw.Flush()
}

func measure(argv []string) sample {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout = io.Discard
	var stderr strings.Builder
	cmd.Stderr = &stderr
	begin := time.Now()
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %s: %v\n%s", strings.Join(argv, " "), err, stderr.String())
		os.Exit(1)
	}
	wall := time.Since(begin)
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return sample{
		wall:   wall,
		cpu:    cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(),
		maxRSS: ru.Maxrss,
	}
}

func median(ss []sample, f func(sample) float64) float64 {
	v := make([]float64, len(ss))
	for i, s := range ss {
		v[i] = f(s)
	}
	sort.Float64s(v)
	return v[len(v)/2]
}

func build(out, pkg string) {
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0") // as released: one static binary
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	check(cmd.Run())
}

func writeResults(table string) {
	host, _ := os.Hostname()
	body := fmt.Sprintf("# acpflow benchmark results\n\nCommand: `go run ./bench -write` (from the repository root).\nMachine: %s, %d CPUs, %s.\n\n%s\n",
		host, runtime.NumCPU(), runtime.Version(), table)
	check(os.WriteFile(filepath.Join("bench", "RESULTS.md"), []byte(body), 0o644))
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}
