package modelserver

import "net/http"

// anthropic serves the anthropic API. TODO(helper): implement.
func (s *Server) anthropic(w http.ResponseWriter, r *http.Request) {
	http.Error(w, "not implemented", http.StatusNotImplemented)
}
