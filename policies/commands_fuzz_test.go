package policies

import (
	"strings"
	"testing"
)

// FuzzCommands checks that no line makes Commands panic or return more
// than its bounds, that the fast path for plain lines agrees with the
// parser, and that an argument quoted by CommandLine parses back to itself.
// Crashers it finds are kept in testdata/fuzz/FuzzCommands.
func FuzzCommands(f *testing.F) {
	for _, seed := range []string{
		"make && rm -rf x", `FOO=1 "rm" -rf x`, `\rm x`, "/bin/rm x", "sudo -u root env -i nice -n 5 rm x",
		"rm\t-rf x", "bash -lc 'rm x'", "echo $(rm -rf x)", "xargs -0 rm < list", "timeout -s KILL 5 rm x",
		"env -S 'rm -rf' x", `eval "rm x"`, "cat <<EOF\n$(rm x)\nEOF\n", "for f in *; do rm $f; done",
		"a;b", "a &", "a |& b", "A=1 B+=2", `$'\x72m' x`, "(((x)))", "echo `a \\`b\\``", "f() { rm x; }",
		`bash -c "sh -c 'bash -c \"rm x\"'"`, "",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		cmds, err := Commands(line)
		progs, perr := Programs(line)
		if (err == nil) != (perr == nil) || len(cmds) != len(progs) {
			t.Fatalf("Commands and Programs disagree: %q, %v and %q, %v", cmds, err, progs, perr)
		}
		if err == nil {
			total := 0
			for _, c := range cmds {
				total += len(c)
			}
			if len(cmds) > maxCommands || total > maxOutputBytes {
				t.Fatalf("%d commands, %d bytes: past the bounds", len(cmds), total)
			}
		} else if cmds != nil {
			t.Fatalf("an error with commands: %q, %v", cmds, err)
		}
		checkPlainLine(t, line)

		if len(line) > 4096 {
			return
		}
		quoted := argvLine([]string{"x", line})
		got, err := Commands(quoted)
		want := "x " + strings.ReplaceAll(line, "\x00", "")
		if err != nil || len(got) != 1 || got[0] != want {
			t.Fatalf("the argv [x %q] quoted as %q parses back as %q, %v", line, quoted, got, err)
		}
	})
}
