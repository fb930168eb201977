package ui

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/acpflow/acpflow/engine"
)

// The run page names the run's trace, linked when a trace URL template
// is configured (docs/traces.md).
func TestTheRunPageLinksTheRunsTrace(t *testing.T) {
	const id = "0af7651916cd43dd8448eb211c80319c"
	for _, c := range []struct{ template, want string }{
		{"https://traces.example/trace/{trace_id}", `<a id="trace" href="https://traces.example/trace/` + id + `"`},
		{"", `<code id="trace">` + id + `</code>`},
	} {
		f := newFixture(t, Config{TraceURL: c.template})
		f.addRun(t, "r1", time.Now(), engine.StatusSucceeded, "")
		if err := f.w.SetRunTrace(context.Background(), "r1", id); err != nil {
			t.Fatal(err)
		}
		if body := f.get("/runs/r1").Body.String(); !strings.Contains(body, c.want) {
			t.Errorf("template %q: the run page lacks %s", c.template, c.want)
		}
	}
}
