package engine_test

// The schedule on its own: a simulated driver with a virtual clock plays
// each attempt for the time a script gives it, so every case is exact and
// instant (the drivers, with real steps, are the conformance suite's).

import (
	"container/heap"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/workflows"
)

// play is one attempt's script: how long its turn takes, how long its
// agents take to go after it, and whether it completes.
type play struct {
	turn, teardown time.Duration
	fail           bool
	usage          *steps.Usage
}

// sim drives a Schedule on a virtual clock and keeps what happened.
type sim struct {
	t      *testing.T
	s      *engine.Schedule
	script func(step string, index, attempt int) play
	now    time.Time
	queue  events
	seq    int

	log      []string       // "start a/1", "settle a succeeded", "wait a 1s", "cancel …"
	live     int            // attempts whose agents are not gone
	maxLive  int            // the most at once
	liveStep map[string]int // per step
}

type event struct {
	at  time.Time
	seq int
	do  func() []engine.Action
}

type events []event

func (e events) Len() int { return len(e) }
func (e events) Less(i, j int) bool {
	return e[i].at.Before(e[j].at) || e[i].at.Equal(e[j].at) && e[i].seq < e[j].seq
}
func (e events) Swap(i, j int) { e[i], e[j] = e[j], e[i] }
func (e *events) Push(x any)   { *e = append(*e, x.(event)) }
func (e *events) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

func (m *sim) after(d time.Duration, do func() []engine.Action) {
	m.seq++
	heap.Push(&m.queue, event{at: m.now.Add(d), seq: m.seq, do: do})
}

func name(st *engine.Step, el *engine.Element) string {
	if el == nil {
		return st.ID
	}
	return fmt.Sprintf("%s[%d]", st.ID, el.Index)
}

func (m *sim) do(acts []engine.Action) {
	for _, a := range acts {
		switch a := a.(type) {
		case *engine.StartAttempt:
			index := -1
			if a.Element != nil {
				index = a.Element.Index
			}
			p := m.script(a.Step.ID, index, a.N)
			m.log = append(m.log, fmt.Sprintf("start %s/%d", name(a.Step, a.Element), a.N))
			m.live++
			m.liveStep[a.Step.ID]++
			m.maxLive = max(m.maxLive, m.live)
			m.after(p.turn, func() []engine.Action {
				out := &engine.StepResult{StopReason: string(steps.Completed), Output: name(a.Step, a.Element), Usage: p.usage}
				if p.fail {
					out = &engine.StepResult{StopReason: string(steps.Error), Error: "it failed", Usage: p.usage}
				}
				m.after(p.teardown, func() []engine.Action {
					m.live--
					m.liveStep[a.Step.ID]--
					return m.s.Released(a, m.now)
				})
				return m.s.Ended(a, out, m.now)
			})
		case *engine.Wait:
			m.log = append(m.log, fmt.Sprintf("wait %s %s", name(a.Step, a.Element), a.After))
			m.after(a.After, func() []engine.Action { return m.s.Woke(a, m.now) })
		case *engine.Settle:
			m.log = append(m.log, fmt.Sprintf("settle %s %s", a.Step.ID, a.Result.Status))
		case *engine.Cancel:
			m.log = append(m.log, "cancel: "+a.Cause)
		}
	}
}

// run plays the workflow to its end.
func (m *sim) run() {
	m.do(m.s.Start(m.now))
	for m.queue.Len() > 0 {
		e := heap.Pop(&m.queue).(event)
		m.now = e.at
		m.do(e.do())
	}
	if !m.s.Done() {
		m.t.Fatalf("the schedule is not done and nothing is left to happen: %s\n%s", m.s, strings.Join(m.log, "\n"))
	}
	if m.live != 0 {
		m.t.Fatalf("%d attempts never released", m.live)
	}
}

func newSim(t *testing.T, yaml string, script func(step string, index, attempt int) play) *sim {
	t.Helper()
	wf, err := workflows.Parse("wf.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	m := &sim{t: t, script: script, now: time.Unix(0, 0), liveStep: map[string]int{}}
	if script == nil {
		m.script = func(string, int, int) play { return play{turn: 10 * time.Millisecond, teardown: time.Millisecond} }
	}
	m.s = engine.NewSchedule(wf, engine.ScopeOf{RunID: "r", Workspace: "/w"}, time.Second)
	return m
}

func (m *sim) status(id string) string {
	res := m.s.Results()[id]
	if res == nil {
		return "unsettled"
	}
	return string(res.Status) + ":" + res.Error
}

func TestScheduleFollowsNeedsAndMaxParallel(t *testing.T) {
	m := newSim(t, `
name: w
max-parallel: 2
steps:
  - {id: a, uses: fake}
  - {id: b, uses: fake}
  - {id: c, uses: fake}
  - {id: d, needs: [a, b, c], uses: fake}
`, nil)
	m.run()
	if m.maxLive != 2 {
		t.Errorf("at most %d agents at once, want max-parallel's 2", m.maxLive)
	}
	want := []string{"start a/1", "start b/1", "settle a succeeded", "settle b succeeded", "start c/1", "settle c succeeded", "start d/1", "settle d succeeded"}
	if !slices.Equal(m.log, want) {
		t.Errorf("log:\n%s\nwant:\n%s", strings.Join(m.log, "\n"), strings.Join(want, "\n"))
	}
	if st, _ := m.s.End(); st != engine.StatusSucceeded {
		t.Errorf("end %s", st)
	}
}

// A slot is held until the step's agents are gone, not only its turn:
// max-parallel bounds live agents. Its dependants start at its turn's end.
func TestScheduleHoldsASlotThroughTeardownButSettlesAtTurnEnd(t *testing.T) {
	m := newSim(t, `
name: w
max-parallel: 1
steps:
  - {id: a, uses: fake}
  - {id: b, uses: fake}
  - {id: c, needs: [a], uses: fake}
`, func(step string, _, _ int) play {
		return play{turn: 10 * time.Millisecond, teardown: 100 * time.Millisecond}
	})
	m.run()
	if m.maxLive != 1 {
		t.Errorf("%d agents at once under max-parallel 1", m.maxLive)
	}
	if got := m.s.Results()["a"].Status; got != engine.StatusSucceeded {
		t.Errorf("a: %s", got)
	}
}

func TestScheduleRetriesWithBackoffThenFails(t *testing.T) {
	m := newSim(t, `
name: w
max-parallel: 4
steps:
  - {id: a, uses: fake, retries: 2}
  - {id: b, needs: [a], uses: fake}
  - {id: c, uses: fake}
`, func(step string, _, attempt int) play {
		return play{turn: 10 * time.Millisecond, fail: step == "a"}
	})
	m.run()
	want := []string{"start a/1", "start c/1", "wait a 1s", "settle c succeeded", "start a/2", "wait a 2s", "start a/3", "settle a failed", "cancel: cancelled: another step failed", "settle b skipped"}
	if !slices.Equal(m.log, want) {
		t.Errorf("log:\n%s\nwant:\n%s", strings.Join(m.log, "\n"), strings.Join(want, "\n"))
	}
	if res := m.s.Results()["a"]; res.Attempts != 3 {
		t.Errorf("a took %d attempts, want 3", res.Attempts)
	}
	if got := m.status("b"); got != "skipped:not started: cancelled: another step failed" {
		t.Errorf("b: %s", got)
	}
	if st, msg := m.s.End(); st != engine.StatusFailed || msg != "" {
		t.Errorf("end %s %q, want failed with the step's own error", st, msg)
	}
}

// A failed step stops the run: the others in flight are cancelled, those
// waiting for a slot or a retry never start again.
func TestScheduleAFailureCancelsTheRest(t *testing.T) {
	m := newSim(t, `
name: w
max-parallel: 2
steps:
  - {id: bad, uses: fake}
  - {id: slow, uses: fake, retries: 3}
  - {id: queued, uses: fake}
`, func(step string, _, attempt int) play {
		switch step {
		case "bad":
			return play{turn: 50 * time.Millisecond, fail: true}
		case "slow":
			return play{turn: 10 * time.Millisecond, fail: true}
		}
		return play{turn: time.Millisecond}
	})
	m.run()
	for id, want := range map[string]string{
		"bad":    "failed:it failed",
		"slow":   "cancelled:cancelled: another step failed",
		"queued": "skipped:not started: cancelled: another step failed",
	} {
		if got := m.status(id); got != want {
			t.Errorf("%s: %s, want %s", id, got, want)
		}
	}
}

func TestScheduleForEachBoundsElementsAndCombines(t *testing.T) {
	m := newSim(t, `
name: w
steps:
  - {id: each, uses: fake, for-each: "${{ [1, 2, 3, 4, 5] }}", max-parallel: 2}
  - {id: after, needs: [each], uses: fake}
`, nil)
	m.run()
	if m.maxLive != 2 {
		t.Errorf("%d elements at once, want the for-each's max-parallel 2", m.maxLive)
	}
	res := m.s.Results()["each"]
	if res.Status != engine.StatusSucceeded || fmt.Sprint(res.Output) != "[each[0] each[1] each[2] each[3] each[4]]" {
		t.Errorf("each: %s %v", res.Status, res.Output)
	}
	if res.DurationMS != 32 {
		t.Errorf("each took %d ms of virtual time, want 32 (three rounds of a 10 ms turn, a slot freed 1 ms after)", res.DurationMS)
	}
}

func TestScheduleEmptyAndBrokenForEach(t *testing.T) {
	m := newSim(t, `
name: w
max-parallel: 4
steps:
  - {id: none, uses: fake, for-each: "${{ [] }}"}
  - {id: broken, uses: fake, for-each: "${{ 1..20000 }}", continue-on-error: true}
  - {id: after, needs: [none, broken], uses: fake}
`, nil)
	m.run()
	if got := m.status("none"); got != "succeeded:" {
		t.Errorf("an empty for-each: %s", got)
	}
	if got := m.status("broken"); !strings.HasPrefix(got, "failed:for-each:") {
		t.Errorf("a for-each of a number: %s", got)
	}
	if got := m.status("after"); got != "succeeded:" {
		t.Errorf("after a continue-on-error failure: %s", got)
	}
}

func TestScheduleStopSkipsWhatHasNotStarted(t *testing.T) {
	m := newSim(t, `
name: w
max-parallel: 1
steps:
  - {id: a, uses: fake}
  - {id: b, uses: fake}
  - {id: c, needs: [a], uses: fake}
`, nil)
	m.do(m.s.Start(m.now))
	m.do(m.s.Stop(engine.Stop{Cause: "interrupted", Status: engine.StatusCancelled, Error: "interrupted"}, m.now))
	for m.queue.Len() > 0 {
		e := heap.Pop(&m.queue).(event)
		m.now = e.at
		m.do(e.do())
	}
	if got := m.status("b"); got != "skipped:not started: interrupted" {
		t.Errorf("b: %s", got)
	}
	if got := m.status("c"); got != "skipped:not started: interrupted" {
		t.Errorf("c: %s", got)
	}
	if st, msg := m.s.End(); st != engine.StatusCancelled || msg != "interrupted" {
		t.Errorf("end %s %q", st, msg)
	}
}

func TestScheduleStopsOnceTheBudgetIsSpent(t *testing.T) {
	m := newSim(t, `
name: w
max-parallel: 1
budget: {tokens: 100}
steps:
  - {id: a, uses: fake}
  - {id: b, uses: fake}
`, func(step string, _, _ int) play {
		n := int64(150)
		return play{turn: time.Millisecond, usage: &steps.Usage{TotalTokens: &n}}
	})
	m.run()
	if got := m.status("b"); !strings.HasPrefix(got, "skipped:not started: ") {
		t.Errorf("b after the budget was spent: %s", got)
	}
	if st, msg := m.s.End(); st != engine.StatusFailed || msg == "" {
		t.Errorf("end %s %q, want failed saying the budget", st, msg)
	}
}
