package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/acpflow/acpflow/internal/transcript"
	"github.com/acpflow/acpflow/policies"
)

func TestATranscriptKeepsItsSpawnAndOneWithoutStaysWithout(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	if err := s.CreateRun(ctx, Run{ID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	spawn := &transcript.Spawn{
		Policy: policies.SourceWorkflow, Rule: "inherit=all,scrub-credentials", Cwd: "/w",
		Ambient: []string{"FOO_TOKEN", "PATH", "PLAIN_VAR"}, Explicit: []string{"DEPLOY_KEY"},
		Env: []string{"DEPLOY_KEY", "PATH", "PLAIN_VAR"},
	}
	spawned := transcript.Step{Step: "plan", Attempt: 1, Agent: "demo", Messages: []transcript.Message{}, Spawn: spawn}
	continued := transcript.Step{Step: "plan", Attempt: 2, Agent: "demo", Messages: []transcript.Message{}}
	for _, st := range []transcript.Step{spawned, continued} {
		if err := s.SaveTranscript(ctx, "run-1", &st); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Transcripts(ctx, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d transcripts, want 2", len(got))
	}
	if !reflect.DeepEqual(got[0].Spawn, spawn) {
		t.Errorf("spawn read back = %+v, want %+v", got[0].Spawn, spawn)
	}
	if got[1].Spawn != nil {
		t.Errorf("an attempt saved without a spawn reads back with %+v", got[1].Spawn)
	}
}

func TestATranscriptRecordedBeforeSpawnsWereKeptReadsWithoutOne(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	// The store as the acpflow of schema 4 left it, written with SQL alone:
	// this acpflow's statements need the columns of later migrations.
	db, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		t.Fatal(err)
	}
	saved := migrations
	migrations = saved[:4] // the schema before spawn_json
	err = migrate(ctx, db, path)
	migrations = saved
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO runs (id, status, started_at) VALUES ('old', 'succeeded', '2026-12-01T00:00:00.000000000Z')`,
		`INSERT INTO transcripts (run_id, step_id, item, attempt, agent, truncated, messages_json) VALUES ('old', 'plan', -1, 1, 'demo', 0, '[]')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Transcripts(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Spawn != nil || got[0].Agent != "demo" {
		t.Errorf("the old transcript reads back as %+v", got)
	}
}

func TestATranscriptKeepsItsModelExchangesAndOneWithoutStaysWithout(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	if err := s.CreateRun(ctx, Run{ID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	model := &transcript.Model{
		Agent: transcript.ModelAgent{Preset: "claude", Command: "npx", Args: []string{"-y", "pkg"}, Mode: "default"},
		API:   "anthropic", Upstream: "https://api.anthropic.com",
		Exchanges: []transcript.Exchange{{AtMS: 5, Method: "POST", Path: "/v1/messages", Model: "claude-sonnet-4-5", Status: 200,
			ContentType: "text/event-stream", Request: transcript.Body(`{"stream":true}`),
			Response: transcript.Body("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")},
			{AtMS: 9, Method: "POST", Path: "/v1/messages", Status: 200, Response: transcript.Body{0xff, 0xfe}}},
	}
	recorded := transcript.Step{Step: "ask", Attempt: 1, Agent: "claude", Messages: []transcript.Message{}, Model: model}
	plain := transcript.Step{Step: "ask", Attempt: 2, Agent: "claude", Messages: []transcript.Message{}}
	for _, st := range []transcript.Step{recorded, plain} {
		if err := s.SaveTranscript(ctx, "run-1", &st); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Transcripts(ctx, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !reflect.DeepEqual(got[0].Model, model) {
		t.Fatalf("model read back = %+v, want %+v", got[0].Model, model)
	}
	if got[1].Model != nil {
		t.Errorf("an attempt saved without exchanges reads back with %+v", got[1].Model)
	}
}
