package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/internal/termtext"
	"github.com/acpflow/acpflow/steps"
)

// batchView shows a batch as a whole: runs done, failed and running, the
// rate and the time left. Thousands of runs would make per-step lines noise.
type batchView struct {
	w     io.Writer
	total int
	begin time.Time
	plain bool
	p     *mpb.Progress
	bar   *mpb.Bar

	mu                    sync.Mutex
	done, failed, running int
}

// newBatchView picks JSON lines, a live line on a terminal, or a plain
// line per finished run.
func newBatchView(w io.Writer, jsonLines bool, total int) view {
	if jsonLines {
		return &jsonView{w: w}
	}
	v := &batchView{w: w, total: total, begin: time.Now(), plain: !isTerminal(w)}
	if !v.plain {
		v.p = mpb.New(mpb.WithOutput(w), mpb.WithRefreshRate(200*time.Millisecond), mpb.WithWidth(100))
		v.bar = v.p.New(int64(total), mpb.BarStyle(),
			mpb.PrependDecorators(decor.Any(func(decor.Statistics) string { return v.status() })),
			mpb.AppendDecorators(decor.Any(func(decor.Statistics) string { return v.pace() })),
		)
	}
	return v
}

func (v *batchView) Emit(e steps.Event) {
	switch e.Type {
	case "run_start":
		v.mu.Lock()
		v.running++
		v.mu.Unlock()
	case "run_end":
		v.mu.Lock()
		if e.Fields["invalid"] == nil {
			v.running--
		}
		v.done++
		failed := e.Fields["status"] != engine.StatusSucceeded
		if failed {
			v.failed++
		}
		line := fmt.Sprintf("run %s %v in %s (%d/%d done, %d failed)", e.RunID, e.Fields["status"],
			time.Duration(toInt64(e.Fields["duration_ms"]))*time.Millisecond, v.done, v.total, v.failed)
		if msg, _ := e.Fields["error"].(string); msg != "" && failed {
			line += ": " + firstLine(termtext.Sanitize(msg))
		}
		v.mu.Unlock()
		if v.plain {
			v.mu.Lock()
			fmt.Fprintln(v.w, line)
			v.mu.Unlock()
		} else {
			v.bar.Increment()
		}
	}
}

func (v *batchView) status() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return fmt.Sprintf("batch %d/%d done, %d failed, %d running ", v.done, v.total, v.failed, v.running)
}

func (v *batchView) pace() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	el := time.Since(v.begin)
	if v.done == 0 || el <= 0 {
		return ""
	}
	rate := float64(v.done) / el.Seconds()
	eta := time.Duration(float64(v.total-v.done)/rate) * time.Second
	return fmt.Sprintf(" %.1f runs/s, ETA %s", rate, eta.Round(time.Second))
}

func (v *batchView) Close(results []*engine.RunResult) {
	if v.p != nil {
		v.bar.SetTotal(-1, true)
		v.p.Wait()
	}
	failed := 0
	for _, r := range results {
		if r.Status != engine.StatusSucceeded {
			failed++
		}
	}
	fmt.Fprintf(v.w, "batch: %d runs, %d succeeded, %d failed, in %s\n", len(results), len(results)-failed, failed,
		time.Since(v.begin).Round(time.Millisecond))
}

// lineEvent is the run_end event of a batch line that never ran (its
// inputs were not valid), so that views count it.
func lineEvent(res *engine.RunResult) steps.Event {
	return steps.Event{Type: "run_end", RunID: res.RunID, Time: time.Now(),
		Fields: map[string]any{"status": res.Status, "error": res.Error, "duration_ms": int64(0), "invalid": true}}
}
