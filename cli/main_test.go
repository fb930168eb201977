package cli

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/spf13/cobra"
)

// Covers: the one error→code mapping every binary's main uses: a coded
// error keeps its code however deeply wrapped, an uncoded one is a
// failure (1, not 2), cobra's own usage errors (flags, argument counts,
// an unknown command) are 2, and a command whose stdout was cut short
// exits 1; each error is said once on stderr, terminal escapes removed.
func TestFinishMapsEachErrorToItsCode(t *testing.T) {
	newRoot := func() *cobra.Command {
		root := &cobra.Command{Use: "bin", SilenceErrors: true, SilenceUsage: true}
		var n int
		do := &cobra.Command{Use: "do", Args: cobra.ExactArgs(1), RunE: func(_ *cobra.Command, args []string) error {
			switch args[0] {
			case "uncoded":
				return errors.New("the store broke \x1b[31mred\x1b[0m")
			case "usage":
				return fmt.Errorf("wrapped: %w", UsageErrorf("bad input"))
			case "silent":
				return Outcome(ExitInterrupted)
			}
			return nil
		}}
		do.Flags().IntVar(&n, "n", 0, "")
		root.AddCommand(do)
		UsageErrors(root)
		return root
	}
	for _, c := range []struct {
		args   []string
		outErr error
		code   int
		says   string
	}{
		{[]string{"do", "fine"}, nil, ExitOK, ""},
		{[]string{"do", "uncoded"}, nil, ExitFailed, "bin: the store broke red"},
		{[]string{"do", "usage"}, nil, ExitUsage, "bin: wrapped: bad input"},
		{[]string{"do", "silent"}, nil, ExitInterrupted, ""},
		{[]string{"do", "--n", "many", "x"}, nil, ExitUsage, "bin: invalid argument"},
		{[]string{"do", "--nope", "x"}, nil, ExitUsage, "bin: unknown flag: --nope"},
		{[]string{"do"}, nil, ExitUsage, "bin: accepts 1 arg(s)"},
		{[]string{"bogus"}, nil, ExitUsage, `bin: unknown command "bogus"`},
		{[]string{"do", "fine"}, syscall.EPIPE, ExitFailed, "bin: stdout: broken pipe"},
	} {
		root := newRoot()
		root.SetArgs(c.args)
		var stderr bytes.Buffer
		root.SetErr(&stderr)
		ran, err := root.ExecuteC()
		code := finish(&stderr, "bin", root, ran, err, c.outErr)
		if code != c.code || !strings.HasPrefix(stderr.String(), c.says) || c.says == "" && stderr.Len() > 0 || strings.Contains(stderr.String(), "\x1b") {
			t.Errorf("%q (stdout error %v): exit %d, stderr %q; want %d and %q", c.args, c.outErr, code, stderr.String(), c.code, c.says)
		}
	}
	if Code(nil) != ExitOK || Code(errors.New("x")) != ExitFailed || Code(fmt.Errorf("a: %w", &ExitError{Code: 7, Err: errors.New("b")})) != 7 {
		t.Error("Code does not keep an error's own code, or make an uncoded one 1")
	}
}
