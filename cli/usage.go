package cli

import (
	"strings"

	"github.com/acpflow/acpflow/internal/termtext"
)

// Bounds of what the views print of an agent's words (a kind, a title),
// in bytes; each cut says so.
const (
	idMax      = 200
	kindMax    = 40
	titleMax   = 300
	commandMax = 2000
	reasonMax  = 1000
)

// IndentLines sanitises s first, so that a carriage return turned newline is
// indented like any other line.
func IndentLines(s, prefix string) string {
	return strings.ReplaceAll(termtext.Sanitize(s), "\n", "\n"+prefix)
}
