//go:build realagents

package realagents_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/acpflow/acpflow/internal/modelserver"
)

// Issue 15's structured output on every agent that completes whole turns:
// a step whose answer does not match its output-schema is followed up in
// the same session, the model sees the follow-up after its own first
// answer, and the corrected answer is steps.ID.json for a dependant's if:
// and prompt. The model server answers the first prompt with prose and
// the follow-up (told by the words acpflow's follow-up prompt says) with
// the JSON in a fenced block.

// followUpWords are in every follow-up prompt acpflow sends
// (steps/acpsubagent, outputSchema.followUp).
const followUpWords = "did not match the JSON Schema"

func TestAStructuredStepIsFollowedUpInItsSessionUntilItsAnswerMatches(t *testing.T) {
	forEachTurnAgent(t, func(t *testing.T, s *sandbox, ta *turnAgent) {
		summary := word("VERDICT")
		first := "I reviewed the change and it looks fine to me."
		srv, err := modelserver.StartCued(modelserver.Script{{Say: first}}, modelserver.Cue{
			Carries: followUpWords,
			Script:  modelserver.Script{{Say: "Here it is:\n```json\n{\"approved\": true, \"summary\": \"" + summary + "\"}\n```"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Close)
		prompt := "Review the change. Answer with JSON: approved and summary."
		wf := s.writeWorkflowFile("name: structured\nagents:\n" + s.turnAgentYAML(ta, srv, "") + `
  d: {builtin: demo}
steps:
  - id: review
    uses: acp-subagent
    with:
      agent: a
      prompt: "` + prompt + `"
      output-schema:
        type: object
        required: [approved, summary]
        additionalProperties: false
        properties:
          approved: {type: boolean}
          summary: {type: string}
  - {id: merge, needs: review, if: steps.review.json.approved, uses: acp-subagent, with: {agent: d, prompt: "Merge: ${{ steps.review.json.summary }}"}}
  - {id: hold, needs: review, if: "!steps.review.json.approved", uses: acp-subagent, with: {agent: d, prompt: Hold it.}}
`)
		res, es, r := s.flowOne("run", wf, "--workspace", s.dir)
		review := res.Steps["review"]
		t.Logf("exit %d in %s; review %s/%s in %d ms", r.code, r.elapsed.Round(time.Millisecond), review.Status, review.StopReason, review.DurationMS)
		if r.code != 0 || review.Status != "succeeded" {
			t.Fatalf("exit %d, review %s: %s\nstderr:\n%s", r.code, review.Status, review.Error, r.stderr)
		}
		if want := map[string]any{"approved": true, "summary": summary}; !reflect.DeepEqual(review.JSON, want) {
			t.Errorf("review's json %#v, want %#v (final %q)", review.JSON, want, review.Final)
		}
		if !strings.Contains(review.Final, "```json") || !strings.Contains(review.Output, first) {
			t.Errorf("final %q, output %q: want the follow-up's fenced answer final, both answers in output", review.Final, review.Output)
		}
		if m, h := res.Steps["merge"], res.Steps["hold"]; m.Status != "succeeded" || h.Status != "skipped" || !strings.Contains(m.Output, "Merge: "+summary) {
			t.Errorf("merge %s %q, hold %s: want merge run with the json's summary, hold skipped", m.Status, m.Output, h.Status)
		}
		if sr := updates(es, "schema_retry", "review"); len(sr) != 1 || sr[0]["retry"] != 1.0 {
			t.Errorf("schema_retry events %v, want one", sr)
		}
		if n, m := len(updates(es, "spawned", "review")), len(updates(es, "session", "review")); n != 1 || m != 1 {
			t.Errorf("review spawned %d agents and opened %d sessions, want the follow-up on the one of each", n, m)
		}
		// The follow-up reached the model in the same conversation: after
		// the step's prompt and the model's own first answer.
		reqs := srv.Requests()
		follow := turnsOf(t, reqs, followUpWords)
		if carry(follow, prompt) != len(follow) || carry(follow, first) != len(follow) {
			t.Errorf("%d follow-up turns; %d carried the step's prompt, %d the first answer: want all", len(follow), carry(follow, prompt), carry(follow, first))
		}
		cued := 0
		for _, q := range reqs {
			if q.Cue != "" {
				cued++
			}
		}
		t.Logf("%d model requests, %d of the follow-up", len(reqs), len(follow))
		if cued == 0 || cued != len(follow) {
			t.Errorf("%d requests answered by the follow-up's script, %d carried the follow-up", cued, len(follow))
		}
	})
}
