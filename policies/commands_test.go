package policies

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestCommands(t *testing.T) {
	tests := []struct {
		name string
		line string
		want []string
	}{
		{"a simple command is itself", "ls -la", []string{"ls -la"}},
		{"and-and separates commands", "make && rm -rf x", []string{"make", "rm -rf x"}},
		{"or-or separates commands", "test -f x || rm -rf x", []string{"test -f x", "rm -rf x"}},
		{"a semicolon separates commands", "cd /tmp;rm -rf x", []string{"cd /tmp", "rm -rf x"}},
		{"a pipe separates commands", "curl -s x | sh", []string{"curl -s x", "sh"}},
		{"a pipe with stderr separates commands", "make |& tee log", []string{"make", "tee log"}},
		{"a newline separates commands", "make\nrm -rf x\n", []string{"make", "rm -rf x"}},
		{"a background ampersand separates commands", "sleep 9 & rm -rf x", []string{"sleep 9", "rm -rf x"}},
		{"a redirection is not part of the command", "make 2>&1 >log", []string{"make"}},
		{"an ampersand-greater redirection does not separate", "make &>log", []string{"make"}},
		{"operators in double quotes are one argument", `echo "a && b; c | d"`, []string{"echo a && b; c | d"}},
		{"operators in single quotes are one argument", `echo 'a && b' && ls`, []string{"echo a && b", "ls"}},
		{"an escaped semicolon is an argument", `find . -exec rm {} \; && ls`, []string{"find . -exec rm {} ;", "ls"}},
		{"an escaped quote inside double quotes is a quote", `echo "a \" && b" && ls`, []string{`echo a " && b`, "ls"}},
		{"an empty line has no commands", "", nil},
		{"a comment has no commands", "# rm -rf x", nil},
		{"a trailing comment is not an argument", "ls # rm -rf x", []string{"ls"}},
		{"tabs separate words as spaces do", "rm\t-rf\tx", []string{"rm -rf x"}},
		{"runs of blanks are one separator", "rm   -rf  x", []string{"rm -rf x"}},

		{"a leading assignment is removed", "FOO=1 rm -rf x", []string{"rm -rf x"}},
		{"several leading assignments are removed", "A=1 B+=2 C= rm x", []string{"rm x"}},
		{"an assignment alone runs no command", "FOO=1", nil},
		{"an assignment after the program is an argument", "make CC=gcc", []string{"make CC=gcc"}},
		{"a double-quoted program is resolved", `FOO=1 "rm" -rf x`, []string{"rm -rf x"}},
		{"a single-quoted program is resolved", `'rm' -rf x`, []string{"rm -rf x"}},
		{"a program quoted in parts is resolved", `r"m" -rf x`, []string{"rm -rf x"}},
		{"a backslash before the program is resolved", `\rm x`, []string{"rm x"}},
		{"a backslash inside the program is resolved", `r\m x`, []string{"rm x"}},
		{"an ANSI-C quoted program is resolved", `$'\x72m' x`, []string{"rm x"}},
		{"a percent sign in ANSI-C quotes is kept", `echo $'100%d'`, []string{"echo 100%d"}},
		{"a line continuation inside a word is nothing", "r\\\nm x", []string{"rm x"}},
		{"a program given by path is its basename", "/bin/rm x", []string{"rm x"}},
		{"a relative program path is its basename", "./node_modules/.bin/rimraf x", []string{"rimraf x"}},
		{"a path argument is kept whole", "cat /etc/passwd", []string{"cat /etc/passwd"}},
		{"an argument with spaces is joined as it is", `git commit -m "fix the build"`, []string{"git commit -m fix the build"}},
		{"a word with an expansion keeps its source", `rm -rf "$HOME/x" ${TMP}/y`, []string{"rm -rf $HOME/x ${TMP}/y"}},
		{"a program with an expansion is not shortened", `"$BIN/rm" x`, []string{"$BIN/rm x"}},
		{"a backslash before an ordinary character in double quotes is kept", `echo "a\b"`, []string{`echo a\b`}},

		{"exec is removed", "exec rm x", []string{"rm x"}},
		{"exec's options are removed", "exec -a name -c rm x", []string{"rm x"}},
		{"the time keyword is removed", "time rm x", []string{"rm x"}},
		{"time as a program is removed with its options", "/usr/bin/time -v -o log rm x", []string{"rm x"}},
		{"nohup is removed", "nohup rm x &", []string{"rm x"}},
		{"sudo is removed", "sudo rm x", []string{"rm x"}},
		{"sudo's options and their values are removed", "sudo -E -u root -g wheel rm x", []string{"rm x"}},
		{"sudo's clustered options are removed", "sudo -Eu root rm x", []string{"rm x"}},
		{"sudo's long options are removed", "sudo --user=root --preserve-env -- rm x", []string{"rm x"}},
		{"sudo's assignments are removed", "sudo FOO=1 rm x", []string{"rm x"}},
		{"doas is removed with its options", "doas -u root rm x", []string{"rm x"}},
		{"env is removed", "env rm x", []string{"rm x"}},
		{"env's options are removed", "env -i rm x", []string{"rm x"}},
		{"env's options with values and assignments are removed", "env -u HOME -C /tmp FOO=1 BAR=2 rm x", []string{"rm x"}},
		{"env's long options are removed", "env --ignore-environment --chdir=/tmp --unset HOME rm x", []string{"rm x"}},
		{"env's split string is a command line", "env -S 'rm -rf' x", []string{"rm -rf x"}},
		{"env's long split string is a command line", "env --split-string='FOO=1 rm' x", []string{"rm x"}},
		{"xargs is removed and the arguments it reads are marked", "xargs rm < list", []string{"rm ..."}},
		{"xargs's options are removed", "xargs -0 -n 1 -P4 rm -f < list", []string{"rm -f ..."}},
		{"xargs with a placeholder gets no marker", "xargs -0 -I{} rm {} < list", []string{"rm {}"}},
		{"xargs's long options are removed", "xargs --null --max-args=1 rm", []string{"rm ..."}},
		{"command is removed", "command rm x", []string{"rm x"}},
		{"command's options are removed and over-report", "command -v rm", []string{"rm"}},
		{"builtin is removed", "builtin echo x", []string{"echo x"}},
		{"nice is removed", "nice rm x", []string{"rm x"}},
		{"nice's adjustment is removed", "nice -n 10 rm x", []string{"rm x"}},
		{"nice's old-style adjustment is removed", "nice -10 rm x", []string{"rm x"}},
		{"timeout and its duration are removed", "timeout 5 rm x", []string{"rm x"}},
		{"timeout's options and its duration are removed", "timeout -s KILL --kill-after=2 5s rm x", []string{"rm x"}},
		{"stdbuf is removed with its options", "stdbuf -oL -e 0 rm x", []string{"rm x"}},
		{"ionice is removed with its options", "ionice -c 3 -n7 rm x", []string{"rm x"}},
		{"wrappers are removed repeatedly", "sudo env FOO=1 nice rm x", []string{"rm x"}},
		{"wrappers given by path are removed", "/usr/bin/sudo /usr/bin/env /bin/rm x", []string{"rm x"}},
		{"a wrapper with no command is kept", "sudo -i", []string{"sudo -i"}},
		{"env with only assignments is kept", "env FOO=1", []string{"env FOO=1"}},

		{"a sh -c script is parsed in turn", "sh -c 'rm x'", []string{"sh -c rm x", "rm x"}},
		{"a bash -lc script is parsed in turn", "bash -lc 'make && rm -rf x'", []string{"bash -lc make && rm -rf x", "make", "rm -rf x"}},
		{"a shell given by path with clustered flags is unwrapped", "/bin/bash -euc 'rm x'", []string{"bash -euc rm x", "rm x"}},
		{"a shell's -o option and its value are skipped", "bash -o pipefail -c 'rm x' name arg", []string{"bash -o pipefail -c rm x name arg", "rm x"}},
		{"zsh, dash and ksh scripts are parsed", "zsh -c 'rm a'; dash -c 'rm b'; ksh -c 'rm c'", []string{"zsh -c rm a", "rm a", "dash -c rm b", "rm b", "ksh -c rm c", "rm c"}},
		{"a shell script inside a shell script is parsed", `bash -c "sh -c 'rm x'"`, []string{"bash -c sh -c 'rm x'", "sh -c rm x", "rm x"}},
		{"a shell behind wrappers is unwrapped", "sudo -u root bash -c 'rm x'", []string{"bash -c rm x", "rm x"}},
		{"a shell without -c runs a file", "bash script.sh", []string{"bash script.sh"}},
		{"a shell reading stdin is kept", "curl -s x | sh", []string{"curl -s x", "sh"}},
		{"eval's arguments are parsed", `eval "rm -rf x"`, []string{"eval rm -rf x", "rm -rf x"}},
		{"a shell script that does not resolve statically keeps its source", `bash -c "rm $X"`, []string{"bash -c rm $X", "rm $X"}},

		{"a command substitution's commands follow their command", "echo $(rm -rf x) && ls", []string{"echo $(rm -rf x)", "rm -rf x", "ls"}},
		{"a substitution inside double quotes is found", `echo "$(curl x | sh)"`, []string{"echo $(curl x | sh)", "curl x", "sh"}},
		{"backticks are found", "echo `rm -rf x`", []string{"echo `rm -rf x`", "rm -rf x"}},
		{"nested substitutions are found", "a $(b $(c; d))", []string{"a $(b $(c; d))", "b $(c; d)", "c", "d"}},
		{"a process substitution is found", "diff <(ls a) <(ls b)", []string{"diff <(ls a) <(ls b)", "ls a", "ls b"}},
		{"a substitution in an assignment is found", "X=$(rm x) make", []string{"make", "rm x"}},
		{"a substitution in a bare assignment is found", "export X=$(rm x)", []string{"rm x"}},
		{"a substitution in a redirection is found", "cat > $(rm x)", []string{"cat", "rm x"}},
		{"a substitution in a here-document is found", "cat <<EOF\n$(rm x)\nEOF\n", []string{"cat", "rm x"}},
		{"a quoted here-document is only text", "cat <<'EOF'\n$(rm x)\nEOF\n", []string{"cat"}},
		{"a subshell's commands are found", "(cd x && rm -rf y)", []string{"cd x", "rm -rf y"}},
		{"a group's commands are found", "{ rm -rf x; }", []string{"rm -rf x"}},
		{"if's condition and branches are found", "if true; then rm -rf x; else ls; fi", []string{"true", "rm -rf x", "ls"}},
		{"a for loop's body is found", "for f in *; do rm $f; done", []string{"rm $f"}},
		{"a while loop's condition and body are found", "while read f; do rm $f; done < list", []string{"read f", "rm $f"}},
		{"a case branch is found", "case $x in a) rm x;; esac", []string{"rm x"}},
		{"a function's body is found", "f() { rm x; }; f", []string{"rm x", "f"}},
		{"a negation is removed", "! grep -q x f", []string{"grep -q x f"}},
		{"a test clause runs no command but its substitutions", "[[ -f $(rm x) ]]", []string{"rm x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Commands(tt.line)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("Commands(%q) = %q, %v; want %q", tt.line, got, err, tt.want)
			}
		})
	}
}

// TestCommandsCatchRm is the README's rule on every spelling of rm that
// issue 9 lists, and on look-alikes that are not rm.
func TestCommandsCatchRm(t *testing.T) {
	rm := func(line string) (bool, error) {
		cmds, err := Commands(line)
		return slices.ContainsFunc(cmds, func(c string) bool { return strings.HasPrefix(c, "rm ") }), err
	}
	for _, line := range []string{
		"rm -rf x", "make && rm -rf x", `FOO=1 "rm" -rf x`, `\rm x`, "/bin/rm x", "sudo rm x",
		"rm\t-rf x", "bash -lc 'rm x'", "echo $(rm -rf x)", "xargs rm < list", "timeout 5 rm x",
		"env -i rm x", "exec rm x", "time rm x", "nohup rm x", "command rm x", "nice -n 5 rm x",
		"sudo env FOO=1 nice rm x", "/usr/bin/env bash -c 'rm x'", `sh -c "cd /; rm -rf x"`,
		"make | rm x", "(rm x)", "{ rm x; }", "if true; then rm x; fi", "echo `rm x`", `echo "$(rm x)"`,
		"ls; rm x", "ls & rm x", "ls\nrm x", "true || rm x", `r'm' x`, `$'rm' x`, `eval 'rm x'`,
	} {
		t.Run(line+" runs rm", func(t *testing.T) {
			if got, err := rm(line); !got || err != nil {
				t.Errorf("rm in Commands(%q) = %t, %v; want true", line, got, err)
			}
		})
	}
	for _, line := range []string{
		"echo rm", "grep rm file", "firm x", "rmdir x", "echo 'rm -rf x'", "ls rm", "git rm x",
		"printf '%s' \"rm x\"", "cat <<'EOF'\nrm x\nEOF\n", "# rm x", "rm", "rm-x y",
	} {
		t.Run(strings.ReplaceAll(line, "\n", `\n`)+" does not run rm with arguments", func(t *testing.T) {
			if got, err := rm(line); got || err != nil {
				t.Errorf("rm in Commands(%q) = %t, %v; want false", line, got, err)
			}
		})
	}
}

func TestPrograms(t *testing.T) {
	tests := []struct {
		name string
		line string
		want []string
	}{
		{"each command's program is listed", "make test && sudo /bin/rm -rf x | tee log", []string{"make", "rm", "tee"}},
		{"a shell and its script's programs are listed", "bash -lc 'cd x && rm y'", []string{"bash", "cd", "rm"}},
		{"a substitution's program is listed", "echo $(curl x)", []string{"echo", "curl"}},
		{"arguments are not programs", "echo rm", []string{"echo"}},
		{"a program with spaces is one program", `"my prog" x`, []string{"my prog"}},
		{"an empty line has no programs", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Programs(tt.line)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("Programs(%q) = %q, %v; want %q", tt.line, got, err, tt.want)
			}
		})
	}
}

func TestCommandsFailClosed(t *testing.T) {
	tests := []struct {
		name  string
		line  string
		limit bool   // the error is a bound, not a syntax error
		want  string // in the error
	}{
		{"an unclosed quote is an error", `echo "a && rm x`, false, "reached EOF without closing quote"},
		{"an unclosed substitution is an error", "echo $(rm -rf x && ls", false, "cannot parse"},
		{"a dangling operator is an error", "make &&", false, "cannot parse"},
		{"a leading operator is an error", "&& rm x", false, "cannot parse"},
		{"an unparsable shell script is an error", "bash -c 'rm \"x'", false, "cannot parse"},
		{"a line over 128 KiB is an error", "echo " + strings.Repeat("a", maxLineBytes), true, "bytes"},
		{"parentheses nested too deep are an error", strings.Repeat("(", maxNesting+1) + "rm x" + strings.Repeat(")", maxNesting+1), true, "nested"},
		{"shell scripts nested too deep are an error", nestedShells(maxScriptDepth + 1), true, "scripts nested"},
		{"too many commands are an error", strings.Repeat("a;", maxCommands+1), true, "commands"},
		{"too large a result is an error", strings.Repeat("echo $(echo $(echo $(echo "+strings.Repeat("a", 4000)+"))); ", 60), true, "bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Commands(tt.line)
			if err == nil {
				t.Fatalf("Commands = %d commands, no error", len(got))
			}
			if got != nil || errors.Is(err, errCommandLimit) != tt.limit || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Commands = %q, %v; want no commands and an error with %q (limit %t)", got, err, tt.want, tt.limit)
			}
		})
	}
	t.Run("shell scripts nested to the limit are read", func(t *testing.T) {
		got, err := Commands(nestedShells(maxScriptDepth))
		if err != nil || got[len(got)-1] != "rm x" {
			t.Errorf("Commands = %q, %v; want rm x last", got, err)
		}
	})
}

// nestedShells is `rm x` inside n levels of `sh -c`, each quoted for the
// one around it.
func nestedShells(n int) string {
	line := "rm x"
	for range n {
		line = "sh -c " + quoteWord(line)
	}
	return line
}

// TestPlainLineAgreesWithTheParser checks the fast path on lines it takes,
// and that it leaves to the parser the lines it must; FuzzCommands checks
// the agreement on any line.
func TestPlainLineAgreesWithTheParser(t *testing.T) {
	for _, line := range []string{
		"make test && rm -rf build", "a;b", "a &", "a & b", "a;", "a |& b", "a||b", "FOO=1 a", "A=1",
		"timeout 5 rm x", "sudo -u root rm x", "bash -c rm", "a=b=c d", "x+=1 y",
		"a 'b'", "a > b", `make test 2>&1 && rm -rf "build"`, `"rm" -rf x`, `r"m" 'a b' ''`, "a 2>/dev/null | b",
		"a >>log <in", "a 2>&1", "a >&2", "a 2 >&1", ">x a", `git commit -m "fix: it's done"`, "a>b;c<d",
	} {
		t.Run(line+" is split as the parser reads it", func(t *testing.T) {
			if _, ok := plainLine(line); !ok {
				t.Fatalf("plainLine(%q) left it to the parser", line)
			}
			checkPlainLine(t, line)
		})
	}
	for _, line := range []string{
		"a;;b", "a &&", "a |", "| a", "&& a", ";", "a & ;", "if x", "time a", "a && then", "export A=1",
		"FOO=1 for", "a\nb", "a#b", "a*", "~/rm", "a {b}", "  ",
		`a "$x"`, "a \"`b`\"", `a "b\"c"`, "a 'b", "a <<EOF", "a <(b)", "a >(b)", "a >| b", "a &> b", "a >",
		"a > ;", `"A=1" b`, "A='1 2' b", "a <> b", ">x",
	} {
		t.Run(line+" is left to the parser", func(t *testing.T) {
			if argvs, ok := plainLine(line); ok {
				t.Errorf("plainLine(%q) = %v, true", line, argvs)
			}
		})
	}
}

// checkPlainLine fails t unless the fast path and the parser give the same
// commands, programs and error for line.
func checkPlainLine(t *testing.T, line string) {
	t.Helper()
	argvs, ok := plainLine(line)
	if !ok {
		return
	}
	var fast commandWalker
	for _, argv := range argvs {
		fast.argv(argv, 0)
	}
	var slow commandWalker
	err := slow.parse(line, 0)
	if (fast.err == nil) != (err == nil) || !slices.Equal(fast.commands, slow.commands) || !slices.Equal(fast.programs, slow.programs) {
		t.Errorf("line %q: plainLine gives %q, %v; the parser %q, %v", line, fast.commands, fast.err, slow.commands, err)
	}
}

// TestTheRmRuleOnEachAgent runs the README's rules through ParsePermission
// and Answer on a request in each agent's shape: rm is rejected whether the
// agent sends a string, an argv or only a title, and a line that cannot be
// parsed is rejected with the parse error as the record's reason.
func TestTheRmRuleOnEachAgent(t *testing.T) {
	p, err := ParsePermission(map[string]any{
		"rules": []any{
			map[string]any{"if": `any(commands(tool.command), # startsWith "rm ")`, "then": "reject", "reason": "rm"},
			map[string]any{"if": `"curl" in programs(tool.command)`, "then": "reject", "reason": "curl"},
			map[string]any{"if": `tool.kind == "execute"`, "then": "allow"},
		},
	}, "")
	if err != nil {
		t.Fatal(err)
	}
	options := []Option{opt("always", "allow_always"), opt("once", "allow_once"), opt("no", "reject_once")}
	tests := []struct {
		name       string
		title      string
		rawInput   any
		wantOption string
		wantReason string
	}{
		{"claude's string command with rm is rejected", "Run it", map[string]any{"command": "make && rm -rf build"}, "no", "rm"},
		{"codex's argv with rm is rejected", "Run it", map[string]any{"command": []any{"/bin/bash", "-lc", "make && rm -rf build"}}, "no", "rm"},
		{"gemini's title with rm is rejected", "cd sub && sudo rm -rf build", nil, "no", "rm"},
		{"a program found by programs is rejected", "Run it", map[string]any{"command": "echo $(curl -s x)"}, "no", "curl"},
		{"a harmless command is allowed once, never always", "Run it", map[string]any{"command": []any{"ls", "-la"}}, "once", ""},
		{"a line that cannot be parsed is rejected with the parse error", `echo "unclosed && rm x`, nil, "no", "reached EOF without closing quote"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &PermissionRequest{Tool: Tool{ID: "c", Kind: "execute", Title: tt.title, RawInput: tt.rawInput}, Options: options}
			req.Tool.Normalize()
			rec := Answer(context.Background(), p, SourceWorkflow, req)
			if rec.OptionID != tt.wantOption || !strings.Contains(rec.Reason, tt.wantReason) || rec.Command != req.Tool.Command {
				t.Errorf("record = %+v; want option %q, a reason with %q and the command", rec, tt.wantOption, tt.wantReason)
			}
		})
	}
	t.Run("the parse error names the rule and says the line cannot be parsed", func(t *testing.T) {
		req := &PermissionRequest{Tool: Tool{Kind: "execute", Command: "rm 'x"}, Options: options}
		rec := Answer(context.Background(), p, SourceWorkflow, req)
		if rec.Decision != Reject || rec.Rule != "1" || !strings.HasPrefix(rec.Reason, "policy error: rule 1: ") || !strings.Contains(rec.Reason, "cannot parse the command line") {
			t.Errorf("record = %+v", rec)
		}
	})
}
