package main

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/cli"
	"github.com/acpflow/acpflow/runs"
	"github.com/acpflow/acpflow/runs/trace"
	"github.com/acpflow/acpflow/ui"
)

func newUICmd() *cobra.Command {
	u := &uiServe{}
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve a local web page over the run store: runs, batches, graphs, transcripts, decisions, live",
		Long: `Serve a local web page over the run store that acpflow run writes: the runs and
batches (live), each run's DAG with its steps' live states, its timeline, each
step's output, transcript and permission decisions (unasked tool calls marked),
usage and cost, and a policy what-if page (acpflow policy test over recorded
runs, with the policy pasted as text). Everything is embedded in the binary and
works offline.

The store is read, never changed, but by its two actions: cancelling a running
run, which interrupts its acpflow process as Ctrl-C does, and answering a
permission request waiting for a person (acpflow approvals lists them).

Every request needs the server's token, on loopback too (every local user and
every sandboxed agent with the network can reach a loopback port). The token is
--token, else $ACPFLOW_UI_TOKEN, else a new random one at each start. The link
printed carries a random token once (?token=; a token you chose is never
printed: add ?token=YOURS once yourself): opening it sets an HttpOnly,
SameSite=Strict cookie. Scripts send "Authorization: Bearer TOKEN". Set the
token through the environment, not --token: a command line is visible to every
local user (ps). Requests for another Host name are refused, and a change
(POST) needs the page's own Origin.

The JSON API: GET /api/runs (as acpflow runs --json), GET /api/runs/RUN_ID (as
acpflow show --json), POST /api/runs/RUN_ID/cancel, GET /api/approvals (as
acpflow approvals --json), POST /api/approvals/ID. See docs/ui.md.`,
		Example: `  acpflow ui
  acpflow ui --addr 127.0.0.1:9000 --open
  ACPFLOW_UI_TOKEN="$(cat ~/.config/acpflow/ui-token)" acpflow ui --addr 0.0.0.0:8080`,
		Args: cli.Args(""),
		RunE: u.run,
	}
	addStateFlag(cmd, &u.state)
	addPolicyFlag(cmd, &u.policy)
	fl := cmd.Flags()
	fl.StringVar(&u.addr, "addr", "127.0.0.1:8080", "HOST:PORT to listen on (port 0: any free one)")
	fl.StringVar(&u.token, "token", "", "the token requests must carry; prefer $"+uiTokenEnv+", which ps does not show (default: a new random one at each start)")
	fl.BoolVar(&u.open, "open", false, "open the page in the default browser (given a page only you read, so that the token is on no command line)")
	return cmd
}

// uiServe is ui's flags; run is the command.
type uiServe struct {
	addr, state, token, policy string
	open                       bool
}

// run serves the page over the store until an interrupt.
func (u *uiServe) run(cmd *cobra.Command, _ []string) error {
	if _, _, err := net.SplitHostPort(u.addr); err != nil {
		return cli.UsageErrorf("--addr %q: want HOST:PORT, e.g. 127.0.0.1:8080", u.addr)
	}
	token, chosen, err := uiToken(u.token, os.Getenv)
	if err != nil {
		return err
	}
	outer, err := loadOuter(u.policy)
	if err != nil {
		return err
	}
	s, err := runs.OpenReadOnly(u.state)
	if err != nil {
		return cli.UsageError(err)
	}
	defer s.Close()
	srv, err := ui.New(ui.Config{Store: s, Token: token, Outer: outer, TraceURL: trace.URLTemplate(outer.Telemetry(), os.Getenv)})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", u.addr)
	if err != nil {
		return cli.UsageErrorf("--addr %s: %v", u.addr, err)
	}
	url := pageURL(ln.Addr())
	link := url + "?token=" + token
	announceUI(cmd.OutOrStdout(), s.Path(), url, link, chosen)
	if u.open {
		defer openBrowser(link)()
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := srv.Serve(ctx, ln); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// announceUI says where the page is: the store it serves and the link to
// open, with the token in it unless the user chose the token.
func announceUI(out io.Writer, store, url, link, chosen string) {
	fmt.Fprintf(out, "acpflow ui: serving %s\n", store)
	if chosen != "" {
		// A token the user chose is theirs to know: it stays out of
		// the output, which may be a log others read.
		fmt.Fprintf(out, "acpflow ui: requests need the token from %s; open the page once with ?token=TOKEN\n", chosen)
		fmt.Fprintf(out, "acpflow ui: open %s\n", url)
	} else {
		fmt.Fprintf(out, "acpflow ui: open %s\n", link)
	}
}

// uiTokenEnv names the environment variable that holds the UI's token:
// unlike --token, it is not in the process list other users read.
const uiTokenEnv = "ACPFLOW_UI_TOKEN"

// uiToken is the token the UI serves under: --token, else
// $ACPFLOW_UI_TOKEN (as --state comes before $ACPFLOW_STATE), else a new
// random one; chosen names where a token the user chose came from ("" for
// a generated one).
//
// # Notes
//
// A chosen token goes into a URL, a cookie and a header, and is the one
// thing that keeps other local users out: it must be 16 to 256 of the
// characters a URL, a cookie and a header carry as they are.
func uiToken(flag string, getenv func(string) string) (token, chosen string, err error) {
	switch {
	case flag != "":
		token, chosen = flag, "--token"
	case getenv(uiTokenEnv) != "":
		token, chosen = getenv(uiTokenEnv), "$"+uiTokenEnv
	default:
		return ui.NewToken(), "", nil
	}
	if len(token) < 16 || len(token) > 256 {
		return "", "", cli.UsageErrorf("%s: %d characters; a token has 16 to 256 (leave it unset for a random one)", chosen, len(token))
	}
	for _, c := range token {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-._~", c)) {
			return "", "", cli.UsageErrorf("%s: a token holds only letters, digits and - . _ ~ (e.g. openssl rand -hex 16)", chosen)
		}
	}
	return token, chosen, nil
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

// openBrowser opens link in the user's browser, best effort: the address
// is printed either way. It returns what removes the page it wrote.
//
// # Notes
//
// The link carries the token, and a command line is visible to every user
// of the machine (ps), the browser's for as long as it runs: the browser
// is given instead the path of a page only this user can read, which goes
// on to the link.
func openBrowser(link string) (remove func()) {
	dir, err := os.MkdirTemp("", "acpflow-ui-")
	if err != nil {
		return func() {}
	}
	remove = func() { os.RemoveAll(dir) }
	page := filepath.Join(dir, "open.html")
	to := html.EscapeString(link)
	body := `<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=` + to + `"><title>acpflow ui</title><a href="` + to + `">acpflow ui</a>` + "\n"
	if err := os.WriteFile(page, []byte(body), 0o600); err != nil {
		return remove
	}
	name := "xdg-open"
	if runtime.GOOS == "darwin" {
		name = "open"
	}
	c := exec.Command(name, page)
	if err := c.Start(); err == nil {
		go c.Wait()
	}
	return remove
}
