package dag

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Warm: the engine is built; each op draws the graph.
func BenchmarkSVG20Warm(b *testing.B)  { benchWarm(b, 20) }
func BenchmarkSVG500Warm(b *testing.B) { benchWarm(b, 500) }

func benchWarm(b *testing.B, n int) {
	if err := Warm(context.Background()); err != nil {
		b.Fatal(err)
	}
	g := bigGraph(n)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := SVG(context.Background(), g); err != nil {
			b.Fatal(err)
		}
	}
}

// Cold: each op is a fresh process (this test binary, running TestColdDrawHelper) whose first
// call draws the graph, so it pays the Graphviz WASM compile. "nocache" starts with an empty
// compilation cache (the first `acpflow ui` on a machine); "cached" with the cache the
// previous run left (every later start). Reported: warm-ms (Warm, i.e. compile or cache
// load and instantiate), first-ms (the first SVG after it), process-ms (whole process).
func BenchmarkSVG20ColdNoCache(b *testing.B)  { benchCold(b, 20, false) }
func BenchmarkSVG500ColdNoCache(b *testing.B) { benchCold(b, 500, false) }
func BenchmarkSVG20ColdCached(b *testing.B)   { benchCold(b, 20, true) }
func BenchmarkSVG500ColdCached(b *testing.B)  { benchCold(b, 500, true) }

func benchCold(b *testing.B, n int, cached bool) {
	cacheHome := b.TempDir()
	run := func() (warm, first float64) {
		if !cached {
			cacheHome = b.TempDir()
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestColdDrawHelper$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "DAG_COLD_STEPS="+strconv.Itoa(n), "XDG_CACHE_HOME="+cacheHome)
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("helper: %v\n%s", err, out)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if _, err := fmt.Sscanf(strings.TrimSpace(l), "cold warm=%g first=%g", &warm, &first); err == nil {
				return warm, first
			}
		}
		b.Fatalf("helper printed no timings:\n%s", out)
		return
	}
	if cached {
		run() // fill the cache
	}
	var warmSum, firstSum float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w, f := run()
		warmSum, firstSum = warmSum+w, firstSum+f
	}
	b.ReportMetric(warmSum/float64(b.N), "warm-ms")
	b.ReportMetric(firstSum/float64(b.N), "first-ms")
}

// TestColdDrawHelper runs only as the benchmarks' child process.
func TestColdDrawHelper(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv("DAG_COLD_STEPS"))
	if err != nil {
		t.Skip("run by BenchmarkSVG*Cold*")
	}
	t0 := time.Now()
	if err := Warm(context.Background()); err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	if _, err := SVG(context.Background(), bigGraph(n)); err != nil {
		t.Fatal(err)
	}
	t2 := time.Now()
	fmt.Printf("cold warm=%g first=%g\n", float64(t1.Sub(t0).Microseconds())/1000, float64(t2.Sub(t1).Microseconds())/1000)
}

// Replacing the engine's instance (what happens when its memory passes the limit).
func BenchmarkEngineRestart(b *testing.B) {
	if err := Warm(context.Background()); err != nil {
		b.Fatal(err)
	}
	limit := engineMemoryLimit
	defer func() { engineMemoryLimit = limit }()
	for i := 0; i < b.N; i++ {
		engineMemoryLimit = 0
		engineSlot <- struct{}{}
		err := recycleEngine(context.Background())
		<-engineSlot
		if err != nil {
			b.Fatal(err)
		}
	}
}
