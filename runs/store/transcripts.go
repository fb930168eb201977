package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/acpflow/acpflow/internal/transcript"
)

// SaveTranscript records one step attempt's transcript, replacing one
// recorded for the same attempt before (a resumed run re-runs a step from
// attempt 1).
func (s *Store) SaveTranscript(ctx context.Context, runID string, t *transcript.Step) error {
	msgs := t.Messages
	if msgs == nil {
		msgs = []transcript.Message{}
	}
	body, err := json.Marshal(msgs)
	if err != nil {
		return fmt.Errorf("store: transcript of step %s of run %s: %w", t.Step, runID, err)
	}
	item := -1
	if t.Index != nil {
		item = *t.Index
	}
	truncated := 0
	if t.Truncated {
		truncated = 1
	}
	spawn, err := nullJSON(t.Spawn != nil, t.Spawn)
	if err != nil {
		return fmt.Errorf("store: spawn of step %s of run %s: %w", t.Step, runID, err)
	}
	model, err := nullJSON(t.Model != nil, t.Model)
	if err != nil {
		return fmt.Errorf("store: model exchanges of step %s of run %s: %w", t.Step, runID, err)
	}
	// One statement, prepared: it is written for every step of every run.
	return s.exec(durable(ctx), fmt.Sprintf("store: save the transcript of step %s of run %s", t.Step, runID),
		&s.stmts.saveTranscript, runID, t.Step, item, t.Attempt, t.Agent, truncated, string(body), spawn, model)
}

// nullJSON is v as JSON when set, else NULL.
func nullJSON(set bool, v any) (sql.NullString, error) {
	if !set {
		return sql.NullString{}, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return sql.NullString{}, err
	}
	return sql.NullString{String: string(b), Valid: true}, nil
}

// Transcripts reads a run's transcripts, in the order of its steps (file
// order), elements and attempts, each with its spawn's env decision when
// one was recorded. Permission records are the steps' (see runs.Export).
func (s *Store) Transcripts(ctx context.Context, runID string) ([]transcript.Step, error) {
	if err := s.Ready(ctx); err != nil {
		return nil, err
	}
	rows, err := s.r.QueryContext(ctx, `SELECT t.step_id, t.item, t.attempt, t.agent, t.truncated, t.messages_json, t.spawn_json, t.model_json
FROM transcripts t LEFT JOIN steps s ON s.run_id = t.run_id AND s.step_id = t.step_id
WHERE t.run_id = ? ORDER BY COALESCE(s.ord, 0), t.step_id, t.item, t.attempt`, runID)
	if err != nil {
		return nil, fmt.Errorf("store: read the transcripts of run %s: %w", runID, err)
	}
	defer rows.Close()
	var out []transcript.Step
	for rows.Next() {
		var t transcript.Step
		var item, truncated int
		var body string
		var spawn, model sql.NullString
		if err := rows.Scan(&t.Step, &item, &t.Attempt, &t.Agent, &truncated, &body, &spawn, &model); err != nil {
			return nil, fmt.Errorf("store: read the transcripts of run %s: %w", runID, err)
		}
		if item >= 0 {
			t.Index = &item
		}
		t.Truncated = truncated != 0
		if err := json.Unmarshal([]byte(body), &t.Messages); err != nil {
			return nil, fmt.Errorf("store: the transcript of step %s of run %s: %w", t.Step, runID, err)
		}
		if spawn.Valid {
			t.Spawn = &transcript.Spawn{}
			if err := json.Unmarshal([]byte(spawn.String), t.Spawn); err != nil {
				return nil, fmt.Errorf("store: the spawn of step %s of run %s: %w", t.Step, runID, err)
			}
		}
		if model.Valid {
			t.Model = &transcript.Model{}
			if err := json.Unmarshal([]byte(model.String), t.Model); err != nil {
				return nil, fmt.Errorf("store: the model exchanges of step %s of run %s: %w", t.Step, runID, err)
			}
		}
		out = append(out, t)
	}
	return out, rows.Err()
}
