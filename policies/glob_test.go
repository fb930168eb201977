package policies

import (
	"strings"
	"testing"
)

func TestGlob(t *testing.T) {
	tests := []struct {
		name    string
		pattern string
		path    string
		want    bool
	}{
		{"a literal pattern matches itself only", "src/main.go", "src/main.go", true},
		{"a literal pattern is anchored at the end", "src/main", "src/main.go", false},
		{"a literal pattern is anchored at the start", "main.go", "src/main.go", false},
		{"star matches a run within one element", "src/*.go", "src/main.go", true},
		{"star matches an empty run", "src/*.go", "src/.go", true},
		{"star does not cross a slash", "src/*.go", "src/a/main.go", false},
		{"star alone does not match a path with a slash", "*", "a/b", false},
		{"two stars cross slashes", "src/**", "src/a/b/c.go", true},
		{"two stars match an absolute path", "/home/**/.ssh/*", "/home/u/.ssh/id_ed25519", true},
		{"two stars then a slash also match no directory", "src/**/*.go", "src/main.go", true},
		{"two stars then a slash match many directories", "src/**/*.go", "src/a/b/main.go", true},
		{"two stars then a slash still need the rest to match", "src/**/*.go", "src/a/b/main.rs", false},
		{"two stars at the start match any prefix", "**/.env", "/ws/app/.env", true},
		{"two stars at the start match no prefix", "**/.env", ".env", true},
		{"two stars in an element match across elements", "/ws/**.pem", "/ws/certs/a/key.pem", true},
		{"a question mark matches one character", "file?.txt", "file1.txt", true},
		{"a question mark needs exactly one character", "file?.txt", "file.txt", false},
		{"a question mark does not match a slash", "a?b", "a/b", false},
		{"a question mark matches one multibyte character", "caf?", "café", true},
		{"a backslash makes a star literal", `a\*b`, "a*b", true},
		{"an escaped star does not match a run", `a\*b`, "axxb", false},
		{"a bracket is literal", "[ab].go", "[ab].go", true},
		{"an empty pattern matches only an empty path", "", "", true},
		{"an empty pattern does not match a path", "", "a", false},
		{"many stars stay linear and correct", "**a**a**a**a**a**b", strings.Repeat("a", 200), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Glob(tt.pattern, tt.path); got != tt.want {
				t.Errorf("Glob(%q, %q) = %t; want %t", tt.pattern, tt.path, got, tt.want)
			}
		})
	}
}
