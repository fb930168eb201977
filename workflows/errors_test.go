package workflows

import (
	"strings"
	"testing"
)

func TestErrorRendering(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  *Error
		want string
	}{
		{
			name: "the caret sits under the column",
			err:  &Error{File: "wf.yaml", Line: 3, Col: 5, Msg: "bad", source: "  - nedds: x"},
			want: "wf.yaml:3:5: bad\n 3 |   - nedds: x\n   |     ^",
		},
		{
			name: "tabs before the column stay tabs so the caret lines up",
			err:  &Error{File: "wf.yaml", Line: 12, Col: 3, Msg: "tab", source: "\t\tx"},
			want: "wf.yaml:12:3: tab\n 12 | \t\tx\n    | \t\t^",
		},
		{
			name: "columns count characters, not bytes",
			err:  &Error{File: "wf.yaml", Line: 1, Col: 6, Msg: "m", source: `a: "é ${{ x }}"`},
			want: "wf.yaml:1:6: m\n 1 | a: \"é ${{ x }}\"\n   |      ^",
		},
		{
			name: "a column past the end of the line still gets a caret",
			err:  &Error{File: "wf.yaml", Line: 1, Col: 4, Msg: "m", source: "a:"},
			want: "wf.yaml:1:4: m\n 1 | a:\n   |    ^",
		},
		{
			name: "a long line is cut around the column",
			err:  &Error{File: "wf.yaml", Line: 1, Col: 300, Msg: "m", source: strings.Repeat("a", 299) + "X" + strings.Repeat("b", 300)},
			want: "wf.yaml:1:300: m\n 1 | ..." + strings.Repeat("a", 60) + "X" + strings.Repeat("b", 59) + "...\n   | " + strings.Repeat(" ", 63) + "^",
		},
		{
			name: "an error without a position is the file and the message",
			err:  &Error{File: "wf.yaml", Msg: "m"},
			want: "wf.yaml: m",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestErrorsJoinsEveryError(t *testing.T) {
	es := Errors{{File: "a", Msg: "one"}, {File: "a", Msg: "two"}}
	if got, want := es.Error(), "a: one\na: two"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestSuggest(t *testing.T) {
	known := []string{"id", "uses", "with", "needs", "if", "timeout", "retries", "continue-on-error", "for-each", "max-parallel"}
	for _, tc := range []struct{ name, word, want string }{
		{"a dropped letter is found", "neds", "needs"},
		{"swapped letters are one edit", "nedes", "needs"},
		{"case does not matter", "Uses", "uses"},
		{"underscores are dashes", "continue_on_error", "continue-on-error"},
		{"a GitHub Actions key maps to ours", "timeout-minutes", "timeout"},
		{"a dagu key maps to ours", "depends", "needs"},
		{"a short word is not stretched to a different one", "on", ""},
		{"an unrelated word gets nothing", "environment", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := closestWord(tc.word, known); got != tc.want {
				t.Errorf("closestWord(%q) = %q, want %q", tc.word, got, tc.want)
			}
		})
	}
}
