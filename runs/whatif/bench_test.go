package whatif_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/acpflow/acpflow/internal/transcript"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs/whatif"
)

// tenThousand writes 100 transcript files of 100 requests each, in the
// agents' shapes (claude's command string, codex's argv, gemini's bare
// title, edits with locations, reads), every one with its record, and
// returns their paths.
func tenThousand(tb testing.TB) []string {
	dir := tb.TempDir()
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(filepath.Join(ws, "src"), 0o755)
	var paths []string
	for r := 0; r < 100; r++ {
		var calls []call
		for i := 0; i < 100; i++ {
			id := fmt.Sprintf("call_%d", i)
			c := call{id: id, answer: "allow-once", record: record(id, "allow", "allow-once", "1")}
			switch i % 5 {
			case 0:
				c.kind, c.title, c.rawInput = "execute", "go test", map[string]any{"command": "go test ./... && rm -rf build", "description": "Run the tests"}
				c.answer, c.record = "reject-once", record(id, "reject", "reject-once", "2")
			case 1:
				c.kind, c.title, c.rawInput = "execute", "make", map[string]any{"command": []any{"/bin/bash", "-lc", "make -j4 all"}, "cwd": ws}
			case 2:
				c.kind, c.title = "execute", "git status --short"
			case 3:
				c.kind, c.title, c.locations = "edit", "src/a.go", []string{filepath.Join(ws, "src", fmt.Sprintf("f%d.go", i))}
				c.rawInput = map[string]any{"path": c.locations[0], "old_string": "a", "new_string": "b"}
			case 4:
				c.kind, c.title, c.locations = "read", "README.md", []string{filepath.Join(ws, "README.md")}
			}
			calls = append(calls, c)
		}
		f := &transcript.File{RunID: fmt.Sprintf("run-%03d", r), Workflow: "bench", Steps: []transcript.Step{turn("work", ws, calls)}}
		p := filepath.Join(dir, fmt.Sprintf("run-%03d.json", r))
		fh, err := os.Create(p)
		if err != nil {
			tb.Fatal(err)
		}
		if err := f.Write(fh); err != nil {
			tb.Fatal(err)
		}
		fh.Close()
		paths = append(paths, p)
	}
	return paths
}

// BenchmarkPolicyTest10k is `acpflow policy test --transcripts` over
// 10,000 recorded requests with an expr policy, from reading the files to
// the totals: decode, rebuild, decide, compare. Issue 14 asks for under 2 s.
func BenchmarkPolicyTest10k(b *testing.B) {
	paths := tenThousand(b)
	perm := rules(b, "reject",
		[2]string{`tool.kind in ["read", "search", "think"]`, "allow"},
		[2]string{`any(commands(tool.command), # startsWith "rm ")`, "reject"},
		[2]string{`tool.kind == "edit" && all(tool.locations, .in_workspace)`, "allow"},
		[2]string{`tool.kind == "execute" && any(programs(tool.command), # in ["make", "go", "git"])`, "allow"},
	)
	pol := &whatif.Policies{Permission: perm, Source: policies.SourceWorkflow}
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		w := whatif.New(pol)
		for _, p := range paths {
			r, err := transcript.Open(p)
			if err != nil {
				b.Fatal(err)
			}
			if err := w.Test(ctx, whatif.FromReader(r), whatif.Report{}); err != nil {
				b.Fatal(err)
			}
			r.Close()
		}
		tot := w.Totals()
		if tot.Requests != 10000 || tot.Skipped != 0 {
			b.Fatalf("totals = %+v", tot)
		}
		if d := time.Since(start); d > 2*time.Second {
			b.Errorf("10,000 requests took %v, want under 2 s", d)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/10000, "ns/request")
}
