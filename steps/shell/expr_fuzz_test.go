package shell

import (
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"
)

// FuzzPlaceExprs: whatever a command line holds, placing its expressions
// ends in a placement or an error, never a panic; a placement writes each
// variable once, and the line as it will run parses.
func FuzzPlaceExprs(f *testing.F) {
	for _, seed := range []string{
		`echo ${{ a }}`, `echo "${{ a }}" '${{ b }}'`, "cat <<EOF\n${{ a }}\nEOF",
		"cat <<'EOF'\n${{ a }}\nEOF", `echo $(( ${{ a }} ))`, "echo `${{ a }}`",
		`echo ${x:-${{ a }}}`, `a[${{ i }}]=1`, `echo \${{ a }}`, `echo ${{ a }}}}`, `${{`,
		`f() { echo "${{ a }}"; }; f`, `case ${{ a }} in (${{ b }}) ;; esac`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		for _, lang := range []syntax.LangVariant{syntax.LangBash, syntax.LangPOSIX} {
			sites, err := placeExprs(line, lang)
			if err != nil {
				continue
			}
			placed := placedLine(line, sites)
			for i := range sites {
				if strings.Count(placed, "${"+varName(i)+"}") != 1 {
					t.Fatalf("%q placed as %q: %s is not there once", line, placed, varName(i))
				}
			}
			if len(sites) > 0 {
				if _, err := parseCommand(placed, lang); err != nil {
					t.Fatalf("%q placed as %q, which does not parse: %v", line, placed, err)
				}
			}
		}
	})
}
