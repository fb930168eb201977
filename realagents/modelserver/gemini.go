package modelserver

import "net/http"

// gemini serves the gemini API. TODO(helper): implement.
func (s *Server) gemini(w http.ResponseWriter, r *http.Request) {
	http.Error(w, "not implemented", http.StatusNotImplemented)
}
