package egress

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestCurlThroughTheProxy checks the proxy against a client it did not
// write: curl, as an agent's tools would run it.
func TestCurlThroughTheProxy(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not on this machine")
	}
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello "+r.URL.Path)
	})
	plain, tlsSrv, unlisted := httptest.NewServer(hello), httptest.NewTLSServer(hello), httptest.NewServer(hello)
	defer plain.Close()
	defer tlsSrv.Close()
	defer unlisted.Close()
	hostOf := func(s string) string { u, _ := url.Parse(s); return u.Host }
	p, rec := startProxy(t, []string{hostOf(plain.URL), hostOf(tlsSrv.URL)}, defaultLimits)

	cases := []struct {
		name     string
		args     []string
		env      []string
		want     string // stdout
		wantExit int
		method   string
		status   int
	}{
		{"plain HTTP to a listed host", []string{"-x", p.URL(), plain.URL + "/a"}, nil, "hello /a", 0, "GET", 200},
		{"HTTP tunnelled with -p", []string{"-p", "-x", p.URL(), plain.URL + "/b"}, nil, "hello /b", 0, "CONNECT", 200},
		{"HTTPS to a listed host", []string{"-k", "-x", p.URL(), tlsSrv.URL + "/c"}, nil, "hello /c", 0, "CONNECT", 200},
		{"the proxy from Env, without -x", []string{plain.URL + "/d"}, p.Env(), "hello /d", 0, "GET", 200},
		{"HTTPS from Env, without -x", []string{"-k", tlsSrv.URL + "/e"}, p.Env(), "hello /e", 0, "CONNECT", 200},
		{"plain HTTP to an unlisted host gets 403", []string{"-o", "/dev/null", "-w", "%{http_code}", "-x", p.URL(), unlisted.URL}, nil, "403", 0, "GET", 403},
		// curl exits 56 when the proxy refuses a CONNECT.
		{"a tunnel to an unlisted host fails", []string{"-p", "-x", p.URL(), unlisted.URL}, nil, "", 56, "CONNECT", 403},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec.reset()
			// -q first: no ~/.curlrc; an environment of our own: no proxy
			// settings but the case's.
			cmd := exec.Command(curl, append([]string{"-q", "-sS", "--max-time", "10"}, c.args...)...)
			cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, c.env...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			exit := 0
			if ee, ok := err.(*exec.ExitError); ok {
				exit = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if exit != c.wantExit || string(out) != c.want {
				t.Fatalf("curl exited %d with %q (stderr %q), want %d with %q", exit, out, stderr.String(), c.wantExit, c.want)
			}
			at := rec.only(t)
			if at.Method != c.method || at.Status != c.status || at.Host != "127.0.0.1" {
				t.Errorf("recorded %+v", at)
			}
		})
	}
}
