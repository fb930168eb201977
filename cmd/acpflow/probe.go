package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent"
)

func newProbeCmd() *cobra.Command {
	var (
		env     []string
		auth    string
		cwd     string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "probe -- CMD [ARGS...]",
		Short: "Spawn an ACP agent, initialize + session/new, print what it says of itself, tear it down",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			agent := steps.NewAgent("probe")
			agent.Command, agent.Args, agent.Auth = args[0], args[1:], auth
			agent.StartTimeout = timeout
			agent.Env = map[string]string{}
			for _, kv := range env {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return usageErrorf("--env %q: want KEY=VALUE", kv)
				}
				agent.Env[k] = v
			}
			dir, err := resolveWorkspace(cwd)
			if err != nil {
				return usageError(err)
			}
			res, err := acpsubagent.Probe(cmd.Context(), agent, dir, policies.EnvMap(os.Environ()))
			if res != nil {
				b, _ := json.MarshalIndent(res, "", "  ")
				fmt.Fprintln(cmd.OutOrStdout(), string(b))
			}
			if err != nil {
				return &codedError{code: exitFailed, err: err}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&env, "env", nil, "an explicit KEY=VALUE for the agent (repeatable); the ambient env is scrubbed as in a step")
	cmd.Flags().StringVar(&auth, "auth", "", "call authenticate with this method id after initialize")
	cmd.Flags().StringVar(&cwd, "cwd", "", "the session's cwd (default: the current directory)")
	durationFlag(cmd.Flags(), &timeout, "timeout", steps.DefaultStartTimeout, "bound on spawn + initialize + session/new (a duration, or seconds)")
	return cmd
}
