package runs

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A webhook that redirects is not followed (the body is signed for its
// URL), nor tried again: a redirect does not go away. A server error is
// tried again. Neither error names the URL's path, which may be a token.
func TestAWebhookRedirectIsRefusedAtOnceAndAServerErrorRetried(t *testing.T) {
	var hits int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		if r.URL.Path == "/moved/tok3n" {
			http.Redirect(w, r, "https://elsewhere.example/hook", http.StatusTemporaryRedirect)
			return
		}
		w.WriteHeader(http.StatusBadGateway)
	}))
	defer srv.Close()
	retry, err := post(context.Background(), webhook{url: srv.URL + "/moved/tok3n", secret: []byte("s")}, []byte(`{}`))
	if retry || err == nil || !strings.Contains(err.Error(), "redirect") || strings.Contains(err.Error(), "tok3n") || hits != 1 {
		t.Errorf("a redirect: retry %t, %v (%d requests); want no retry, an error saying so without the path, one request", retry, err, hits)
	}
	retry, err = post(context.Background(), webhook{url: srv.URL + "/down/tok3n", secret: []byte("s")}, []byte(`{}`))
	if !retry || err == nil || strings.Contains(err.Error(), "tok3n") {
		t.Errorf("a 502: retry %t, %v; want a retry", retry, err)
	}
}
