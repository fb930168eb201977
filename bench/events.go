package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// event is one line of `acpflow run --json`.
type event struct {
	Type       string    `json:"type"`
	Kind       string    `json:"kind"`
	Step       string    `json:"step"`
	Time       time.Time `json:"time"`
	Tier       string    `json:"tier"`
	DurationMS *int64    `json:"duration_ms"`
	Status     string    `json:"status"`
	StopReason string    `json:"stop_reason"`
	Error      string    `json:"error"`
}

func parseEvents(stdout []byte) ([]event, error) {
	var out []event
	sc := bufio.NewScanner(bytes.NewReader(stdout))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("--json line %q: %w", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out, nil
}

// timeline is when the events of a one-step run happened.
type timeline struct {
	runStart, spawned, initialized, session time.Time
	answered                                time.Time // the last agent_message_chunk: the prompt's answer follows it
	turnEnd                                 time.Time // the prompt's answer, as acpflow saw it
	teardown, stepEnd, runEnd               time.Time
	stopReason, stepError                   string
	tier                                    string
	teardownMS                              int64
	status                                  string
}

func timelineOf(es []event) (timeline, error) {
	var t timeline
	for _, e := range es {
		switch {
		case e.Type == "run_start":
			t.runStart = e.Time
		case e.Type == "run_end":
			t.runEnd = e.Time
		case e.Type == "step_end":
			t.stepEnd, t.status, t.stepError = e.Time, e.Status, e.Error
		case e.Type == "turn_end":
			t.turnEnd, t.stopReason = e.Time, e.StopReason
		case e.Type == "step_update" && e.Kind == "spawned":
			t.spawned = e.Time
		case e.Type == "step_update" && e.Kind == "initialized":
			t.initialized = e.Time
		case e.Type == "step_update" && e.Kind == "session":
			t.session = e.Time
		case e.Type == "step_update" && e.Kind == "agent_message_chunk":
			t.answered = e.Time
		case e.Type == "step_update" && e.Kind == "teardown":
			t.teardown, t.tier = e.Time, e.Tier
			if e.DurationMS != nil {
				t.teardownMS = *e.DurationMS
			}
		}
	}
	for name, v := range map[string]time.Time{"run_start": t.runStart, "spawned": t.spawned, "initialized": t.initialized,
		"session": t.session, "agent_message_chunk": t.answered, "teardown": t.teardown, "step_end": t.stepEnd, "run_end": t.runEnd} {
		if v.IsZero() {
			return t, fmt.Errorf("no %s event", name)
		}
	}
	return t, nil
}

// runTimeline measures one `acpflow run --json` and reads its events.
func runTimeline(c command) (sample, timeline) {
	c.capture = true
	s := c.mustMeasure()
	es, err := parseEvents(s.stdout)
	check(err)
	t, err := timelineOf(es)
	if err != nil {
		check(fmt.Errorf("%v in:\n%s", err, s.stdout))
	}
	return s, t
}
