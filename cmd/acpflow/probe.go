package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/cli"
	sandboxpkg "github.com/acpflow/acpflow/internal/sandbox"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent"
)

func newProbeCmd() *cobra.Command {
	var (
		env     []string
		auth    string
		cwd     string
		timeout time.Duration
		policy  string
		sandbox bool
	)
	cmd := &cobra.Command{
		Use:   "probe [--sandbox] [-- CMD [ARGS...]]",
		Short: "Spawn an ACP agent, initialize + session/new, print what it says of itself, tear it down; or, with --sandbox, what this machine's kernel can enforce",
		Example: `  acpflow probe -- acpflow agent demo
  acpflow probe --env GEMINI_API_KEY="$GEMINI_API_KEY" -- gemini --acp
  acpflow probe --sandbox`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 0 && !sandbox:
				return cli.ArgsError(cmd, "missing an agent to start (-- CMD [ARGS...]) or --sandbox")
			case len(args) > 0 && sandbox:
				return cli.ArgsError(cmd, "--sandbox starts no agent: give --sandbox or an agent, not both")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				// What a sandbox: would get here (docs/sandbox.md).
				b, _ := json.MarshalIndent(sandboxpkg.Probe(), "", "  ")
				fmt.Fprintln(cmd.OutOrStdout(), string(b))
				return nil
			}
			agent := steps.NewAgent("probe")
			agent.Command, agent.Args, agent.Auth = args[0], args[1:], auth
			agent.StartTimeout = timeout
			agent.Env = map[string]string{}
			for _, kv := range env {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return cli.UsageErrorf("--env %q: want KEY=VALUE", kv)
				}
				agent.Env[k] = v
			}
			dir, err := runs.ResolveWorkspace(cwd)
			if err != nil {
				return cli.UsageError(err)
			}
			outer, err := loadOuter(policy)
			if err != nil {
				return err
			}
			res, err := acpsubagent.Probe(cmd.Context(), agent, dir, policies.EnvMap(os.Environ()), outer)
			if res != nil {
				b, _ := json.MarshalIndent(res, "", "  ")
				fmt.Fprintln(cmd.OutOrStdout(), terminalJSON(b))
			}
			if err != nil {
				return &cli.ExitError{Code: cli.ExitFailed, Err: err}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&env, "env", nil, "an explicit KEY=VALUE for the agent (repeatable); the ambient env is scrubbed as in a step")
	cmd.Flags().StringVar(&auth, "auth", "", "call authenticate with this method id after initialize")
	cmd.Flags().StringVar(&cwd, "cwd", "", "the session's cwd (default: the current directory)")
	addPolicyFlag(cmd, &policy)
	cmd.Flags().BoolVar(&sandbox, "sandbox", false, "print what this machine's kernel can enforce of a sandbox: (Landlock ABI, namespaces), without starting an agent")
	cli.DurationFlag(cmd.Flags(), &timeout, "timeout", steps.DefaultStartTimeout, "bound on spawn + initialize + session/new (a duration, or seconds)")
	return cmd
}

// terminalJSON returns JSON text with the characters a terminal could act on
// written as \u escapes: the same JSON to a parser, inert on a screen.
// encoding/json escapes the C0 controls but neither DEL nor the C1 controls
// (U+0080–U+009F; U+009B is an 8-bit CSI), and the agent's own JSON that
// probe keeps may hold them, or invalid UTF-8, raw.
func terminalJSON(b []byte) string {
	var out strings.Builder
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		switch {
		case r == utf8.RuneError && size == 1:
			out.WriteString(`\ufffd`)
		case r >= 0x7f && r <= 0x9f:
			fmt.Fprintf(&out, `\u%04x`, r)
		default:
			out.Write(b[:size])
		}
		b = b[size:]
	}
	return out.String()
}
