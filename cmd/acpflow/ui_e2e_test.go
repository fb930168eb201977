package main

import (
	"bufio"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// `acpflow ui` on every interface prints a link one can open: the
// machine's name, not the wildcard address it listens on, with the token.
func TestTheUIOnEveryInterfacePrintsALinkThatOpens(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	if r := acpflow(t, dir, "runs", "--state", state); r.code != 0 {
		t.Fatalf("runs: exit %d\n%s", r.code, r.stderr)
	}
	cmd := exec.Command(acpflowBin, "ui", "--state", state, "--addr", "0.0.0.0:0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	})
	var link string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "acpflow ui: open "); ok {
			link = rest
			break
		}
	}
	u, err := url.Parse(link)
	if err != nil || link == "" {
		t.Fatalf("no link printed (%q): %v", link, err)
	}
	if h := u.Hostname(); h == "::" || h == "0.0.0.0" || h == "" {
		t.Errorf("the link %s names the wildcard address", link)
	}
	if u.Query().Get("token") == "" {
		t.Errorf("the link %s carries no token", link)
	}
	// The machine's name may not resolve here: reach the same port on
	// loopback, with the Host the link names.
	req, _ := http.NewRequest("GET", "http://127.0.0.1:"+u.Port()+u.RequestURI(), nil)
	req.Host = u.Host
	jar, _ := cookiejar.New(nil) // the token is traded for a cookie, then redirected
	resp, err := (&http.Client{Jar: jar}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s: %s", link, resp.Status)
	}
}
