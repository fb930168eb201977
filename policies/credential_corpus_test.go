package policies

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// seedRule is the seed's credential rule, the floor of IsCredential.
var seedRule = regexp.MustCompile(`(?i)KEY|PASSWORD|SECRET|TOKEN`)

// readNames reads a corpus file: one name per line, "#" starts a comment.
func readNames(t *testing.T, file string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		name := strings.TrimSpace(line)
		if name == "" {
			continue
		}
		if seen[name] {
			t.Errorf("%s: %s is listed twice", file, name)
		}
		seen[name] = true
		names = append(names, name)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

func TestCredentialCorpus(t *testing.T) {
	corpora := []struct {
		file     string
		atLeast  int
		dropped  bool
		sentence string
	}{
		{"secret-names.txt", 110, true, "is a secret and is dropped"},
		{"plain-names.txt", 60, false, "is not a secret and is kept"},
		{"false-drops.txt", 1, true, "is a known false drop and is dropped"},
	}
	for _, c := range corpora {
		names := readNames(t, c.file)
		if len(names) < c.atLeast {
			t.Errorf("%s has %d names; want at least %d", c.file, len(names), c.atLeast)
		}
		for _, name := range names {
			t.Run(name+" "+c.sentence, func(t *testing.T) {
				if got := IsCredential(name); got != c.dropped {
					t.Errorf("IsCredential(%q) = %v, want %v", name, got, c.dropped)
				}
			})
		}
	}
}

func TestCredentialRuleDropsEverythingTheSeedDropped(t *testing.T) {
	for _, file := range []string{"secret-names.txt", "plain-names.txt", "false-drops.txt"} {
		for _, name := range readNames(t, file) {
			if seedRule.MatchString(name) && !IsCredential(name) {
				t.Errorf("%s: %s is dropped by the seed but kept by IsCredential", file, name)
			}
		}
	}
}
