package shell_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/shell"
)

// payloads are values an earlier step (an agent) may answer with, each
// shell code if it were pasted into a command line.
var payloads = []string{
	`'; touch PWNED; echo '`,
	`$(touch PWNED)`,
	"`touch PWNED`",
	`"; touch PWNED; "`,
	"line one\ntouch PWNED",
	`$HOME`,
	`*`,
	`a  b	c`,
	`\"; touch PWNED #`,
	`}; touch PWNED; ${`,
	`$((1+1)) ${PATH} ~`,
	`-n`,
}

// renderAs renders every ${{ }} as value, as the engine renders one in
// the step's scope.
func renderAs(value string) func(*steps.Invocation) {
	return func(inv *steps.Invocation) {
		inv.Render = func(s string) (string, error) {
			if !strings.HasPrefix(s, "${{") || !strings.HasSuffix(s, "}}") {
				return "", fmt.Errorf("render %q: not one expression", s)
			}
			return value, nil
		}
	}
}

// TestAnExpressionReachesTheCommandAsDataWhateverItHolds covers the
// places an expression may stand in a command line (class: a bare
// argument, inside double quotes, glued to a word, twice, in $( ), an
// assignment, a here-document's body, a here-string, a for list, a case
// pattern, sh's grammar) with values that are shell code if pasted: the
// command gets each value verbatim, as one word, and no code in it runs.
func TestAnExpressionReachesTheCommandAsDataWhateverItHolds(t *testing.T) {
	for _, tc := range []struct {
		name, shell, run string
		want             func(v string) string
	}{
		{"a bare argument", "", `printf '<%s>' ${{ v }}`, func(v string) string { return "<" + v + ">" }},
		{"inside double quotes", "", `printf '<%s>' "a ${{ v }} b"`, func(v string) string { return "<a " + v + " b>" }},
		{"glued to words", "", `printf '<%s>' x${{ v }}y`, func(v string) string { return "<x" + v + "y>" }},
		{"twice", "", `printf '<%s>' ${{ v }} "${{ v }}"`, func(v string) string { return "<" + v + "><" + v + ">" }},
		{"in a command substitution", "", `printf '<%s>' "$(printf '%s' ${{ v }})"`, func(v string) string { return "<" + v + ">" }},
		{"an assignment", "", `X=${{ v }}; printf '<%s>' "$X"`, func(v string) string { return "<" + v + ">" }},
		{"a here-document's body", "", "cat <<EOF\n<${{ v }}>\nEOF", func(v string) string { return "<" + v + ">\n" }},
		{"a here-string", "", `cat <<< ${{ v }}`, func(v string) string { return v + "\n" }},
		{"a for list", "", `for w in ${{ v }}; do printf '<%s>' "$w"; done`, func(v string) string { return "<" + v + ">" }},
		{"a case pattern", "", `case decoy in ${{ v }}) echo matched;; *) echo literal;; esac`, func(string) string { return "literal\n" }},
		{"a [[ ]] pattern", "", `[[ decoy == ${{ v }} ]] && echo matched || echo literal`, func(string) string { return "literal\n" }},
		{"an array", "", `a=(${{ v }}); printf '<%s>' "${#a[@]}" "${a[0]}"`, func(v string) string { return "<1><" + v + ">" }},
		{"a here-document in $( ) in double quotes", "", "printf '<%s>' \"$(cat <<EOF\n${{ v }}\nEOF\n)\"", func(v string) string { return "<" + v + ">" }},
		{"a redirection's target", "", `printf 'in a file' > ${{ v }}; cat ./${{ v }}`, func(string) string { return "in a file" }},
		{"bash with a script file", "bash -e {0}", `printf '<%s>' ${{ v }}`, func(v string) string { return "<" + v + ">" }},
		{"sh, bare", "sh", `printf '<%s>' ${{ v }}`, func(v string) string { return "<" + v + ">" }},
		{"sh, in double quotes", "sh", `printf '<%s>' "${{ v }}"`, func(v string) string { return "<" + v + ">" }},
	} {
		for _, v := range payloads {
			t.Run(tc.name+"/"+v, func(t *testing.T) {
				with := map[string]any{"run": tc.run}
				if tc.shell != "" {
					with["shell"] = tc.shell
				}
				var ws string
				a := runEdited(t, context.Background(), with, nil, nil, func(inv *steps.Invocation) {
					renderAs(v)(inv)
					ws = inv.Workspace
					// A glob pasted as code would match it.
					os.WriteFile(filepath.Join(ws, "decoy"), nil, 0o644)
				})
				if _, err := os.Stat(filepath.Join(ws, "PWNED")); err == nil {
					t.Fatalf("the value ran as code: PWNED exists (output %q)", a.res.Output)
				}
				if a.res.Err != nil || a.res.Output != tc.want(v) {
					t.Errorf("output %q, error %v\nwant %q", a.res.Output, a.res.Err, tc.want(v))
				}
			})
		}
	}
}

// TestAnExpressionTheShellWouldNotReadAsDataIsRefusedAtItsPlace covers
// the places where the shell does not expand a variable, or evaluates one
// as code (class: quotes that expand nothing, comments, here-document
// delimiters and quoted bodies, arithmetic in each of its forms, array
// indexes, arithmetic tests, nested expansions, backquotes, a backslash,
// shells acpflow does not parse): Prepare refuses the step with the
// expression's line and column in the command line and the fix.
func TestAnExpressionTheShellWouldNotReadAsDataIsRefusedAtItsPlace(t *testing.T) {
	for _, tc := range []struct {
		name, shell, run string
		line, col        int // 0: the error is about the whole run:
		says             string
	}{
		{"single quotes", "", `echo '${{ v }}'`, 1, 7, `use double quotes: "${{ v }}"`},
		{"single quotes on a later line", "", "echo ok\necho 'x ${{ v }}'", 2, 9, "single quotes"},
		{"$'' quotes", "", `echo $'${{ v }}'`, 1, 8, "$'…' quotes"},
		{"a comment", "", "echo ok # ${{ v }}", 1, 11, "comment"},
		{"a here-document's delimiter", "", "cat <<${{ v }}\nx\n", 1, 7, "delimiter"},
		{"a body under <<'EOF'", "", "cat <<'EOF'\n  ${{ v }}\nEOF", 2, 3, "unquote the delimiter"},
		{`a body under <<"EOF"`, "", "cat <<\"EOF\"\n${{ v }}\nEOF", 2, 1, "quoted"},
		{`a body under <<\EOF`, "", "cat <<\\EOF\n${{ v }}\nEOF", 2, 1, "quoted"},
		{"$(( ))", "", `echo $(( ${{ v }} + 1 ))`, 1, 10, "arithmetic"},
		{"(( ))", "", `(( n = ${{ v }} ))`, 1, 8, "arithmetic"},
		{"let", "", `let n=${{ v }}`, 1, 7, "arithmetic"},
		{"a C-style for", "", `for ((i=0; i<${{ v }}; i++)); do :; done`, 1, 14, "arithmetic"},
		{"$(( )) in double quotes", "", `echo "$(( ${{ v }} ))"`, 1, 11, "arithmetic"},
		{"an array index", "", `a[${{ v }}]=1`, 1, 3, "array index"},
		{"an index read", "", `echo "${a[${{ v }}]}"`, 1, 11, "parameter expansion"},
		{"[[ -eq ]]", "", `[[ ${{ v }} -eq 1 ]]`, 1, 4, "arithmetic comparison"},
		{"[[ -v ]]", "", `[[ -v ${{ v }} ]]`, 1, 7, "-v or -R"},
		{"a default value", "", `echo "${X:-${{ v }}}"`, 1, 12, "parameter expansion"},
		{"backquotes", "", "echo `echo ${{ v }}`", 1, 12, "$( )"},
		{"after a backslash", "", `echo \${{ v }}`, 1, 7, "bare or in double quotes"},
		{"after a $", "", `echo $${{ v }}`, 1, 7, "bare or in double quotes"},
		{"python", "python3", `print("${{ v }}")`, 0, 0, `os.environ["V"]`},
		{"zsh", "zsh", `echo "${{ v }}"`, 0, 0, "only in a bash or sh"},
		{"a custom shell", "perl {0}", `print "${{ v }}"`, 0, 0, "only in a bash or sh"},
		{"a shell that is an expression", "${{ inputs.sh }}", `echo "${{ v }}"`, 0, 0, "only in a bash or sh"},
		{"acpflow's variables", "", `echo "$ACPFLOW_EXPR_1 ${{ v }}"`, 0, 0, "acpflow's"},
		{"a line sh cannot parse", "sh", `a=(1 2); echo "${{ v }}"`, 0, 0, "cannot parse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			with := map[string]any{"run": tc.run}
			if tc.shell != "" {
				with["shell"] = tc.shell
			}
			_, err := shell.Kind{}.Prepare(steps.StepConfig{ID: "t", With: with})
			var fe *steps.FieldError
			if !errors.As(err, &fe) || strings.Join(fe.Path, ".") != "with.run" {
				t.Fatalf("Prepare = %v; want a field error at with.run", err)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q does not say %q", err, tc.says)
			}
			var ee *shell.ExprError
			switch {
			case tc.line == 0 && errors.As(err, &ee):
				t.Errorf("error at %d:%d; want one about the whole command line", ee.Line, ee.Col)
			case tc.line == 0:
			case !errors.As(err, &ee):
				t.Errorf("error %q has no place", err)
			case ee.Line != tc.line || ee.Col != tc.col || fe.Col != tc.col || !strings.HasSuffix(fe.Excerpt, "${{ v }}"):
				t.Errorf("placed at %d:%d (excerpt %q, col %d); want %d:%d", ee.Line, ee.Col, fe.Excerpt, fe.Col, tc.line, tc.col)
			}
		})
	}
	_, err := shell.Kind{}.Prepare(steps.StepConfig{ID: "t", With: map[string]any{"run": "echo", "env": map[string]any{"ACPFLOW_EXPR_1": "x"}}})
	var fe *steps.FieldError
	if !errors.As(err, &fe) || strings.Join(fe.Path, ".") != "with.env.ACPFLOW_EXPR_1" {
		t.Errorf("env: ACPFLOW_EXPR_1: %v; want a field error there", err)
	}
}

// TestAValueNoVariableCanHoldStartsNothing covers values the environment
// cannot carry (class: a NUL byte, more than Linux's 128 KiB for one
// variable): the step fails saying why, before anything starts.
func TestAValueNoVariableCanHoldStartsNothing(t *testing.T) {
	for value, says := range map[string]string{
		"a\x00b":                         "NUL byte",
		strings.Repeat("x", 200<<10):     "more than the 128 KiB",
		strings.Repeat("y", 128<<10-100): "",
	} {
		a := runEdited(t, context.Background(), map[string]any{"run": `printf '%s' "${{ v }}" | wc -c`}, nil, nil, renderAs(value))
		switch {
		case says == "" && (a.res.Err != nil || strings.TrimSpace(a.res.Output) != fmt.Sprint(len(value))):
			t.Errorf("%d bytes: output %q, error %v; want them passed", len(value), a.res.Output, a.res.Err)
		case says != "" && (a.res.Err == nil || !strings.Contains(a.res.Err.Error(), says) || len(a.procs.procs) != 0):
			t.Errorf("%d bytes: error %v, processes %v; want %q and nothing started", len(value), a.res.Err, a.procs.procs, says)
		}
	}
}
