package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/runs"
	"github.com/acpflow/acpflow/runs/runcmd"
	"github.com/acpflow/acpflow/ui"
)

func newUICmd() *cobra.Command {
	var (
		addr, state, token, policy string
		open                       bool
	)
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve a local web page over the run store: runs, batches, graphs, transcripts, decisions, live",
		Long: `Serve a local web page over the run store that acpflow run writes: the runs and
batches (live), each run's DAG with its steps' live states, its timeline, each
step's output, transcript and permission decisions (unasked tool calls marked),
usage and cost, and a policy what-if page (acpflow policy test over recorded
runs). Everything is embedded in the binary and works offline.

The store is opened read-only. The one action is cancelling a running run,
which interrupts its acpflow process as Ctrl-C does.

It binds to loopback (127.0.0.1:8080) unless --addr says otherwise; any other
address requires a token (--token, or one generated and printed), sent as
"Authorization: Bearer TOKEN" or as ?token=TOKEN once, which sets a cookie.
Requests for another Host name, and changes from another origin, are refused.

The JSON API: GET /api/runs (as acpflow runs --json), GET /api/runs/RUN_ID (as
acpflow show --json), POST /api/runs/RUN_ID/cancel. See docs/ui.md.`,
		Example: `  acpflow ui
  acpflow ui --addr 127.0.0.1:9000 --open
  acpflow ui --addr 0.0.0.0:8080 --token "$(openssl rand -hex 16)"`,
		Args: runcmd.Args(""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, _, err := net.SplitHostPort(addr); err != nil {
				return runcmd.UsageErrorf("--addr %q: want HOST:PORT, e.g. 127.0.0.1:8080", addr)
			}
			loopback := ui.IsLoopback(addr)
			generated := false
			if token == "" && !loopback {
				token, generated = ui.NewToken(), true
			}
			outer, err := loadOuter(policy)
			if err != nil {
				return err
			}
			s, err := runs.OpenReadOnly(state)
			if err != nil {
				return runcmd.UsageError(err)
			}
			defer s.Close()
			srv, err := ui.New(ui.Config{Store: s, Token: token, Outer: outer})
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return runcmd.UsageErrorf("--addr %s: %v", addr, err)
			}
			url := pageURL(ln.Addr())
			if token != "" {
				url += "?token=" + token
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "acpflow ui: serving %s\n", s.Path())
			if generated {
				fmt.Fprintf(out, "acpflow ui: %s is not loopback: requests need this token (generated; pass --token to choose one): %s\n", addr, token)
			}
			fmt.Fprintf(out, "acpflow ui: open %s\n", url)
			if open {
				openBrowser(url)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := srv.Serve(ctx, ln); err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			return nil
		},
	}
	addStateFlag(cmd, &state)
	addPolicyFlag(cmd, &policy)
	fl := cmd.Flags()
	fl.StringVar(&addr, "addr", "127.0.0.1:8080", "HOST:PORT to listen on (port 0: any free one); not loopback: a token is required")
	fl.StringVar(&token, "token", "", "the token requests must carry (generated when --addr is not loopback and none is given)")
	fl.BoolVar(&open, "open", false, "open the page in the default browser")
	return cmd
}

// pageURL is the address of the page served on addr. A wildcard address
// (--addr 0.0.0.0:PORT or [::]:PORT) is nowhere to browse to: the
// machine's name stands in, as others on the network would reach it.
func pageURL(addr net.Addr) string {
	host, port, _ := net.SplitHostPort(addr.String())
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "localhost"
		if name, err := os.Hostname(); err == nil && name != "" {
			host = name
		}
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}

// openBrowser opens url in the user's browser, best effort: the address is
// printed either way.
func openBrowser(url string) {
	name := "xdg-open"
	if runtime.GOOS == "darwin" {
		name = "open"
	}
	c := exec.Command(name, url)
	if err := c.Start(); err == nil {
		go c.Wait()
	}
}
