package steps

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// A for-each item rides on each step_start as it is, unless it is long:
// then the first MaxItemJSON bytes of its JSON, whole characters, as a
// string marked cut.
func TestAStepStartsItemIsBoundedAndStaysJSON(t *testing.T) {
	if got := string(ItemJSON(map[string]any{"path": "a.go", "n": 2})); got != `{"n":2,"path":"a.go"}` {
		t.Errorf("a small item: %s", got)
	}
	if got := string(ItemJSON(0)); got != "0" {
		t.Errorf("item 0: %s, want it kept (not omitted as empty)", got)
	}
	long := strings.Repeat("é", MaxItemJSON) // 2 bytes each
	raw := ItemJSON(long)
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("the long item is not a JSON string: %v", err)
	}
	if !strings.HasSuffix(s, "…") || !utf8.ValidString(s) || len(s) > MaxItemJSON+len("…") || !strings.HasPrefix(s, `"éé`) {
		t.Errorf("the long item: %d bytes %q…, want its JSON's first %d bytes, valid UTF-8, ending in …", len(s), s[:10], MaxItemJSON)
	}
	ev, _ := json.Marshal(Event{RunID: "r", Step: "s", Data: StepStart{Attempt: 1, Item: ItemJSON("x.go")}})
	if !strings.Contains(string(ev), `"item":"x.go"`) {
		t.Errorf("step_start %s lacks its item", ev)
	}
}
