package store

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/acpflow/acpflow/engine"
)

// BenchmarkSaveStep is the store's cost per step save: an op is one
// SaveStep, alternately a step's start (insert) and its end (update, with
// output, stderr and two permission records), each a committed transaction.
func BenchmarkSaveStep(b *testing.B) {
	ctx := context.Background()
	s := openTest(b)
	if err := s.CreateRun(ctx, Run{ID: "bench"}); err != nil {
		b.Fatal(err)
	}
	output, stderr := strings.Repeat("output ", 100), strings.Repeat("stderr line\n", 200)
	perms := []Permission{
		{ToolCallID: "call_1", Kind: "execute", Title: "go test ./...", Decision: "allow", Outcome: "selected", OptionID: "a1", Policy: "workflow", Rule: "1"},
		{ToolCallID: "call_2", Kind: "edit", Title: "main.go", Decision: "reject", Outcome: "selected", OptionID: "r1", Policy: "default", Reason: "no edits"},
	}
	b.ResetTimer()
	for i := range b.N {
		st := Step{RunID: "bench", StepID: stepName(i / 2), Ord: i / 2, Status: engine.StatusRunning, StartedAt: time.Now()}
		if i%2 == 1 {
			st.Status, st.StopReason, st.Output, st.Stderr, st.Attempts = engine.StatusSucceeded, "completed", output, stderr, 1
			st.EndedAt, st.DurationMS, st.Permissions = time.Now(), 800, perms
		}
		if err := s.SaveStep(ctx, st); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendEvent is what AppendEvent costs its caller (the engine's
// event path). Events the writer could not keep up with would be dropped;
// the dropped/op metric says whether any were.
func BenchmarkAppendEvent(b *testing.B) {
	s := openTest(b)
	e := Event{RunID: "bench", StepID: "plan", Type: "step_update", Fields: map[string]any{"text": "a chunk of agent text, as streamed"}}
	b.ResetTimer()
	for range b.N {
		s.AppendEvent(e)
	}
	b.StopTimer()
	s.events.mu.Lock()
	dropped := s.events.dropped // Flush reports and resets it
	s.events.mu.Unlock()
	s.Flush(context.Background())
	b.ReportMetric(float64(dropped)/float64(b.N), "dropped/op")
}

// BenchmarkEventWrite is the cost per event of getting it to disk: append
// and flush every eventBatchSize events, as the writer does under load.
func BenchmarkEventWrite(b *testing.B) {
	ctx := context.Background()
	s := openTest(b)
	e := Event{RunID: "bench", StepID: "plan", Type: "step_update", Fields: map[string]any{"text": "a chunk of agent text, as streamed"}}
	b.ResetTimer()
	for i := range b.N {
		s.AppendEvent(e)
		if i%eventBatchSize == eventBatchSize-1 {
			if err := s.Flush(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := s.Flush(ctx); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkStepLiveOutput is what a running step's page costs the store
// at each live update: the newest 64 KiB of the step's text read back from
// a log of 100,000 chunks (an agent streaming tokens for a long while),
// after another step's 100,000. "joined": the chunks as the queue joins
// them (100 a batch); "apart": each chunk followed by another event of its
// step, so that none is joined (the worst case).
func BenchmarkStepLiveOutput(b *testing.B) {
	for _, apart := range []bool{false, true} {
		name := map[bool]string{false: "joined", true: "apart"}[apart]
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			s := openTest(b)
			if err := s.CreateRun(ctx, Run{ID: "bench"}); err != nil {
				b.Fatal(err)
			}
			for _, step := range []string{"other", "talk"} {
				s.AppendEvent(Event{RunID: "bench", StepID: step, Type: "step_start", Fields: map[string]any{"attempt": 1}})
				for i := range 100_000 {
					s.AppendEvent(Event{RunID: "bench", StepID: step, Type: "step_update", FieldsJSON: []byte(`{"kind":"agent_message_chunk","text":"a token "}`)})
					if apart {
						s.AppendEvent(Event{RunID: "bench", StepID: step, Type: "step_update", FieldsJSON: []byte(`{"kind":"usage_update"}`)})
					}
					if i%100 == 99 {
						if err := s.Flush(ctx); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
			b.ResetTimer()
			for range b.N {
				outs, err := s.StepLiveOutput(ctx, "bench", "talk", 64<<10)
				if err != nil || len(outs) != 1 || !outs[0].Cut || len(outs[0].Text) < 8<<10 {
					b.Fatalf("%v %v", len(outs), err)
				}
			}
		})
	}
}
