package cli

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/acpflow/acpflow/cli/words"
	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/internal/termtext"
	"github.com/acpflow/acpflow/steps"
)

// batchView shows a batch as a whole: runs done, failed and running, the
// rate and the time left. Thousands of runs would make per-step lines noise.
// It counts runs from their run_end events and keeps the ids of the first
// failed ones, never their results.
type batchView struct {
	w       io.Writer
	batchID string
	begin   time.Time
	plain   bool
	p       *mpb.Progress
	bar     *mpb.Bar

	mu                    sync.Mutex
	total                 int // 0 while unknown (a stream)
	done, failed, running int
	failedIDs             []string // the first maxFailedIDs
	usage                 steps.Usage
	reported, unreported  int // runs whose agents reported tokens, runs with none
	// resume says how to take the batch up again; nil: the summary does
	// not (Executor.ResumeHint).
	resume func(id string) string
}

// setResume: see plainView.setResume; a batch's summary gives the batch's
// id, which resume takes as it takes a run's.
func (v *batchView) setResume(hint func(id string) string) { v.resume = hint }

// maxFailedIDs is how many failed runs the summary names; `acpflow runs
// --batch ID --status failed` lists them all.
const maxFailedIDs = 10

// NewBatchView picks JSON lines, a live line on a terminal, or a plain
// line per finished run. total is the number of runs, 0 when not known
// yet (SetTotal tells it later).
func NewBatchView(w io.Writer, jsonLines bool, batchID string, total int) View {
	if jsonLines {
		return &jsonView{w: w}
	}
	v := &batchView{w: w, batchID: batchID, total: total, begin: time.Now(), plain: !isTerminal(w)}
	if !v.plain {
		v.p = mpb.New(liveOutput(w), mpb.WithRefreshRate(200*time.Millisecond), mpb.WithWidth(100))
		v.bar = v.p.New(int64(total), mpb.BarStyle(),
			mpb.PrependDecorators(decor.Any(func(decor.Statistics) string { return v.status() })),
			mpb.AppendDecorators(decor.Any(func(decor.Statistics) string { return v.pace() })),
		)
	}
	return v
}

// SetTotal tells a batch view how many runs the batch has, once known.
func SetTotal(v View, total int) {
	bv, ok := v.(*batchView)
	if !ok {
		return
	}
	bv.mu.Lock()
	bv.total = total
	bv.mu.Unlock()
	if bv.bar != nil {
		bv.bar.SetTotal(int64(total), false)
	}
}

func (v *batchView) Emit(e steps.Event) {
	switch d := e.Data.(type) {
	case steps.RunStart:
		v.mu.Lock()
		v.running++
		v.mu.Unlock()
	case steps.RunEnd:
		v.mu.Lock()
		if !d.Invalid {
			v.running--
		}
		v.done++
		if _, ok := d.Usage.Tokens(); ok {
			v.reported++
			v.usage.Add(d.Usage)
		} else if !d.Invalid {
			v.unreported++
		}
		failed := d.Status != string(engine.StatusSucceeded)
		if failed {
			v.failed++
			if len(v.failedIDs) < maxFailedIDs {
				v.failedIDs = append(v.failedIDs, e.RunID)
			}
		}
		line := fmt.Sprintf("run %s %s in %s (%s done, %d failed)", e.RunID, d.Status,
			time.Duration(d.DurationMS)*time.Millisecond, v.doneOf(), v.failed)
		if d.Error != "" && failed {
			line += ": " + firstLine(termtext.Sanitize(d.Error))
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
	return fmt.Sprintf("batch %s done, %d failed, %d running ", v.doneOf(), v.failed, v.running)
}

// doneOf is "done/total", or "done" while the total is not known; v.mu is
// held.
func (v *batchView) doneOf() string {
	if v.total <= 0 {
		return fmt.Sprint(v.done)
	}
	return fmt.Sprintf("%d/%d", v.done, v.total)
}

func (v *batchView) pace() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	el := time.Since(v.begin)
	if v.done == 0 || el <= 0 {
		return ""
	}
	rate := float64(v.done) / el.Seconds()
	if v.total <= 0 {
		return fmt.Sprintf(" %.1f runs/s", rate)
	}
	eta := time.Duration(float64(v.total-v.done)/rate) * time.Second
	return fmt.Sprintf(" %.1f runs/s, ETA %s", rate, eta.Round(time.Second))
}

// Close prints the batch's summary from the view's own counts: a batch
// passes no results.
func (v *batchView) Close([]*engine.RunResult) {
	if v.p != nil {
		v.bar.SetTotal(-1, true)
		v.p.Wait()
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	fmt.Fprintf(v.w, "batch: %d runs, %d succeeded, %d failed, in %s\n", v.done, v.done-v.failed, v.failed,
		time.Since(v.begin).Round(time.Millisecond))
	if v.reported > 0 {
		fmt.Fprintf(v.w, "usage: %s", words.Usage(&v.usage))
		if v.unreported > 0 {
			fmt.Fprintf(v.w, " (+%d run(s) unknown)", v.unreported)
		}
		fmt.Fprintln(v.w)
	}
	if v.failed == 0 {
		return
	}
	fmt.Fprintf(v.w, "failed: %s", strings.Join(v.failedIDs, " "))
	if v.failed > len(v.failedIDs) {
		fmt.Fprintf(v.w, " and %d more", v.failed-len(v.failedIDs))
	}
	fmt.Fprintf(v.w, " (acpflow runs --batch %s --status failed)\n", v.batchID)
	if v.resume != nil {
		fmt.Fprintf(v.w, "resume with: %s\n", v.resume(v.batchID))
	}
}
