package modelserver

import "net/http"

// openai serves the openai API. TODO(helper): implement.
func (s *Server) openai(w http.ResponseWriter, r *http.Request) {
	http.Error(w, "not implemented", http.StatusNotImplemented)
}
