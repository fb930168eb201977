package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/goccy/go-yaml"
	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// Every example in the README and docs/ is checked, so that a page cannot
// show a workflow that no longer loads or a command whose flags are gone:
//
//   - a ```yaml block with a top-level steps: is a workflow, and must pass
//     acpflow validate; one with only permission:, env: or sandbox: at the
//     top is a bare policy file, and must load as --policy; any other YAML
//     block must be marked as a fragment (a part of a workflow, or another
//     tool's file), and must still parse as YAML;
//   - every acpflow command line in a ```sh, ```bash or ```console block
//     (in a console block, the lines starting "$ ") must name a command,
//     flags and a number of arguments the binary accepts (`go run
//     ./cmd/acpflow ARGS` counts as acpflow ARGS);
//   - every relative link points at a file that exists and, with #anchor, at
//     one of its headings.
//
// The marker is the word "fragment" after the language (```yaml fragment,
// ```sh fragment), or a first line "# fragment": a YAML fragment is only
// parsed, a shell fragment not read at all. docs/cookbook.md's ```sh blocks
// are also run, by cookbook_e2e_test.go.

// docPages are the markdown files whose examples are checked, relative to
// the repository root.
func docPages(t *testing.T) []string {
	t.Helper()
	root := filepath.Join("..", "..")
	pages := []string{"README.md"}
	for _, pattern := range []string{"docs/*.md", "docs/agents/*.md"} {
		found, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range found {
			rel, _ := filepath.Rel(root, f)
			pages = append(pages, filepath.ToSlash(rel))
		}
	}
	return pages
}

// docBlock is one fenced code block of a markdown page.
type docBlock struct {
	page    string // relative to the repository root
	line    int    // of the opening fence, from 1
	lang    string // the info string's first word
	marks   []string
	section string // the last heading above it
	text    string // the content, the fence's indentation removed
}

func (b docBlock) where() string { return fmt.Sprintf("%s:%d", b.page, b.line) }

// fragment says whether the block is marked as a part of something.
func (b docBlock) fragment() bool {
	return slices.Contains(b.marks, "fragment") || strings.HasPrefix(b.text, "# fragment")
}

// markdownPage is a page's fenced blocks and the headings outside them.
type markdownPage struct {
	blocks   []docBlock
	headings []string
	links    []docLink
}

type docLink struct {
	line   int
	target string
}

var (
	fenceLine   = regexp.MustCompile("^( *)(```+|~~~+)\\s*([^`]*)$")
	linkRef     = regexp.MustCompile(`\]\(([^()\s]+)\)`)
	headingLine = regexp.MustCompile(`^#{1,6} +(.+?)#*$`)
)

// readMarkdown splits a page into its fenced blocks, headings and links.
func readMarkdown(t *testing.T, page string) markdownPage {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", page))
	if err != nil {
		t.Fatal(err)
	}
	var (
		md      markdownPage
		open    *docBlock
		fence   string
		indent  int
		body    []string
		section string
	)
	for i, line := range strings.Split(string(src), "\n") {
		m := fenceLine.FindStringSubmatch(line)
		if open != nil {
			if m != nil && strings.HasPrefix(m[2], fence) && strings.TrimSpace(m[3]) == "" {
				open.text = strings.Join(body, "\n") + "\n"
				md.blocks = append(md.blocks, *open)
				open = nil
				continue
			}
			trimmed := line
			for j := 0; j < indent && strings.HasPrefix(trimmed, " "); j++ {
				trimmed = trimmed[1:]
			}
			body = append(body, trimmed)
			continue
		}
		if m != nil {
			words := strings.Fields(m[3])
			b := docBlock{page: page, line: i + 1, section: section}
			if len(words) > 0 {
				b.lang, b.marks = strings.ToLower(words[0]), words[1:]
			}
			open, fence, indent, body = &b, m[2], len(m[1]), nil
			continue
		}
		if m := headingLine.FindStringSubmatch(line); m != nil {
			section = strings.TrimSpace(m[1])
			md.headings = append(md.headings, section)
		}
		for _, l := range linkRef.FindAllStringSubmatch(stripCodeSpans(line), -1) {
			md.links = append(md.links, docLink{line: i + 1, target: l[1]})
		}
	}
	if open != nil {
		t.Errorf("%s: the code block opened here is never closed", open.where())
	}
	return md
}

// stripCodeSpans removes `code` from a line, so that a link shown as code
// is not taken for one.
func stripCodeSpans(line string) string {
	var b strings.Builder
	in := false
	for _, r := range line {
		if r == '`' {
			in = !in
			continue
		}
		if !in {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// headingAnchors are the ids GitHub gives a page's headings: lower case,
// punctuation dropped, spaces as hyphens, a repeated one numbered.
func headingAnchors(headings []string) map[string]bool {
	ids := map[string]bool{}
	seen := map[string]int{}
	for _, h := range headings {
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		id := b.String()
		if n := seen[id]; n > 0 {
			ids[fmt.Sprintf("%s-%d", id, n)] = true
		} else {
			ids[id] = true
		}
		seen[id]++
	}
	return ids
}

func TestDocsLinksResolve(t *testing.T) {
	anchors := map[string]map[string]bool{}
	anchorsOf := func(page string) map[string]bool {
		if a, ok := anchors[page]; ok {
			return a
		}
		anchors[page] = headingAnchors(readMarkdown(t, page).headings)
		return anchors[page]
	}
	for _, page := range docPages(t) {
		for _, l := range readMarkdown(t, page).links {
			target := l.target
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			dest := page
			if file != "" {
				dest = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(page), file)))
				if _, err := os.Stat(filepath.Join("..", "..", dest)); err != nil {
					t.Errorf("%s:%d: the link %s points at %s, which does not exist", page, l.line, target, dest)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(dest, ".md") && !anchorsOf(dest)[anchor] {
				t.Errorf("%s:%d: the link %s: %s has no heading with the anchor #%s", page, l.line, target, dest, anchor)
			}
		}
	}
}

// bareKeys are the top-level keys of a bare (outer) policy file.
var bareKeys = []string{"permission", "env", "sandbox", "telemetry"}

// demoWorkflow is the workflow a bare policy file in the docs is validated
// with, as --policy.
const demoWorkflow = `name: docs-policy
agents: {demo: {builtin: demo}}
steps:
  - {id: s, uses: acp-subagent, with: {agent: demo, prompt: hi}}
`

func TestDocsYAMLExamplesValidate(t *testing.T) {
	dir := t.TempDir()
	demo := filepath.Join(dir, "demo-workflow.yaml")
	if err := os.WriteFile(demo, []byte(demoWorkflow), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, page := range docPages(t) {
		for _, b := range readMarkdown(t, page).blocks {
			if b.lang != "yaml" && b.lang != "yml" {
				continue
			}
			if b.fragment() {
				// A list of steps shown as it sits under steps: is
				// indented; it must still be YAML.
				var v any
				if err := yaml.Unmarshal([]byte(dedentBlock(b.text)), &v); err != nil {
					t.Errorf("%s: the YAML fragment does not parse: %v", b.where(), err)
				}
				continue
			}
			var top map[string]any
			if err := yaml.Unmarshal([]byte(b.text), &top); err != nil {
				t.Errorf("%s: the YAML block does not parse: %v", b.where(), err)
				continue
			}
			file := filepath.Join(dir, strings.NewReplacer("/", "-", ".", "-").Replace(b.page)+fmt.Sprintf("-%d.yaml", b.line))
			if err := os.WriteFile(file, []byte(b.text), 0o644); err != nil {
				t.Fatal(err)
			}
			var r result
			switch {
			case top["steps"] != nil:
				r = acpflow(t, dir, "validate", file)
			case len(top) > 0 && allKeysIn(top, bareKeys):
				r = acpflow(t, dir, "validate", "--policy", file, demo)
			default:
				t.Errorf("%s: a YAML block that is neither a workflow (a top-level steps:) nor a bare policy file (%s); "+
					"if it is a part of one, or another tool's file, mark it ```yaml fragment", b.where(), strings.Join(bareKeys, ", "))
				continue
			}
			if r.code != 0 {
				t.Errorf("%s: acpflow validate exits %d:\n%s", b.where(), r.code, r.stderr)
			}
		}
	}
}

// dedentBlock removes the indentation all non-blank lines share.
func dedentBlock(text string) string {
	lines := strings.Split(text, "\n")
	common := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if n := len(l) - len(strings.TrimLeft(l, " ")); common < 0 || n < common {
			common = n
		}
	}
	for i, l := range lines {
		if len(l) >= common && common > 0 {
			lines[i] = l[common:]
		}
	}
	return strings.Join(lines, "\n")
}

func allKeysIn(m map[string]any, keys []string) bool {
	for k := range m {
		if !slices.Contains(keys, k) {
			return false
		}
	}
	return true
}

// The checkers themselves catch what they are for.
func TestDocsCheckersCatchMistakes(t *testing.T) {
	for _, line := range []string{
		"run wf.yaml --no-such-flag",
		"show",
		"runz wf.yaml",
		"policy tset p.yaml --runs all",
		"run wf.yaml --concurrency many",
	} {
		if err := docCommandProblem(strings.Fields(line)); err == nil {
			t.Errorf("acpflow %s: no problem found", line)
		}
	}
	for _, line := range []string{
		"run wf.yaml --input task=x -o results.jsonl",
		"version",
		"policy test p.yaml --runs all",
		"probe -- npx -y @agentclientprotocol/codex-acp",
		"run --help",
	} {
		if err := docCommandProblem(strings.Fields(line)); err != nil {
			t.Errorf("acpflow %s: %v", line, err)
		}
	}
	b := docBlock{page: "x.md", line: 1, lang: "sh"}
	got := acpflowCommandLines(t, b, "ls *.md | acpflow run wf.yaml --inputs - && (cd x && go run ./cmd/acpflow show \"$(acpflow runs -n 1 --json | jq -r .run_id)\")\n")
	want := [][]string{{"run", "wf.yaml", "--inputs", "-"}, {"show", "VALUE"}, {"runs", "-n", "1", "--json"}}
	if !slices.EqualFunc(got, want, slices.Equal[[]string]) {
		t.Errorf("command lines %q, want %q", got, want)
	}
	ids := headingAnchors([]string{"4. In CI: `--output` and exit codes", "Events (`--json`)", "Events (`--json`)"})
	for _, id := range []string{"4-in-ci---output-and-exit-codes", "events---json", "events---json-1"} {
		if !ids[id] {
			t.Errorf("no anchor %s in %v", id, ids)
		}
	}
}

func TestDocsCommandLinesParse(t *testing.T) {
	checked := 0
	for _, page := range docPages(t) {
		for _, b := range readMarkdown(t, page).blocks {
			// docs/cli.md's examples are the commands' own, which
			// TestEveryExampleParses holds already.
			if b.fragment() || b.page == "docs/cli.md" || !slices.Contains([]string{"sh", "bash", "shell", "console"}, b.lang) {
				continue
			}
			script := b.text
			if b.lang == "console" {
				var lines []string
				for _, line := range strings.Split(script, "\n") {
					if cmd, ok := strings.CutPrefix(line, "$ "); ok {
						lines = append(lines, cmd)
					}
				}
				script = strings.Join(lines, "\n")
			}
			for _, args := range acpflowCommandLines(t, b, script) {
				checked++
				if err := docCommandProblem(args); err != nil {
					t.Errorf("%s: acpflow %s: %v", b.where(), strings.Join(args, " "), err)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no acpflow command line found in the docs: the block parser is broken")
	}
}

// acpflowCommandLines parses a shell script with a real shell parser and
// returns the arguments of every acpflow command in it, in pipelines, lists
// and substitutions too. An expansion ($VAR, $(cmd)) stands for a value.
func acpflowCommandLines(t *testing.T, b docBlock, script string) [][]string {
	t.Helper()
	f, err := syntax.NewParser().Parse(strings.NewReader(script), b.where())
	if err != nil {
		t.Errorf("%s: the shell block does not parse: %v (mark it ```%s fragment if it is not a script)", b.where(), err, b.lang)
		return nil
	}
	cfg := &expand.Config{
		Env:      expand.FuncEnviron(func(string) string { return "VALUE" }),
		CmdSubst: func(w io.Writer, _ *syntax.CmdSubst) error { _, err := io.WriteString(w, "VALUE"); return err },
	}
	var all [][]string
	syntax.Walk(f, func(n syntax.Node) bool {
		call, ok := n.(*syntax.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		var words []string
		for _, w := range call.Args {
			s, err := expand.Literal(cfg, w)
			if err != nil {
				s = "VALUE"
			}
			words = append(words, s)
		}
		switch {
		case words[0] == "acpflow":
			all = append(all, words[1:])
		case len(words) >= 3 && words[0] == "go" && words[1] == "run" && words[2] == "./cmd/acpflow":
			all = append(all, words[3:])
		}
		return true
	})
	return all
}

// docCommandProblem says what the binary would refuse in a command line
// of the docs before running it: exampleProblem's checks (an unknown
// command or flag, a bad flag value, a wrong number of arguments, a
// missing required flag), which hold the commands' own Examples, and what
// a page may show besides: --help and --version, and a word after a
// command group that is none of its subcommands (cobra lets `acpflow
// policy tset` through as a group's argument).
func docCommandProblem(args []string) error {
	if slices.Contains(args, "--help") || slices.Contains(args, "-h") || slices.Equal(args, []string{"--version"}) {
		return nil
	}
	root := newRootCmd()
	root.SetErr(io.Discard)
	if cmd, rest, err := root.Find(args); err == nil && cmd.Args == nil && cmd.HasAvailableSubCommands() {
		if err := cmd.ParseFlags(rest); err == nil && len(cmd.Flags().Args()) > 0 {
			return fmt.Errorf("unknown command %q for %q", cmd.Flags().Args()[0], cmd.CommandPath())
		}
	}
	return exampleProblem(args)
}

// CI must run the tests as a user does (README.md, "Run the tests"): the
// command in that section's block is a line of .ci/run, as it is written.
func TestCIRunsTheREADMEsTestCommand(t *testing.T) {
	var command string
	for _, b := range readMarkdown(t, "README.md").blocks {
		if b.section == "Run the tests" && b.lang == "sh" {
			command = strings.TrimSpace(b.text)
		}
	}
	if command == "" || strings.Contains(command, "\n") {
		t.Fatalf("README.md's \"Run the tests\" has no one-line sh block (found %q)", command)
	}
	ci, err := os.ReadFile(filepath.Join("..", "..", ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(strings.Split(string(ci), "\n"), command) {
		t.Errorf(".ci/run has no line %q, README.md's test command", command)
	}
}
