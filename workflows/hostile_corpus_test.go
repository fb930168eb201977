package workflows_test

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acpflow/acpflow/workflows"
)

// hostileFile is one input of the hostile corpus and what its error must
// say.
type hostileFile struct {
	name, want string
	src        []byte
}

// generatedHostile are the large hostile files, built here rather than
// committed: each is what issue 11 found to take gigabytes or crash.
func generatedHostile() []hostileFile {
	nest := func(n int, open, close string) []byte {
		return []byte("name: t\nsteps: " + strings.Repeat(open, n) + "1" + strings.Repeat(close, n) + "\n")
	}
	var indent strings.Builder
	indent.WriteString("name: t\nsteps:\n")
	for i := range 3000 {
		indent.WriteString(strings.Repeat(" ", 2+i) + "- \n")
	}
	var keys strings.Builder
	keys.WriteString("name: t\nsteps:\n")
	for i := 0; keys.Len() < 2<<20; i++ {
		keys.WriteString("  - id: s" + strings.Repeat("x", i%7) + "\n")
	}
	return []hostileFile{
		{"80 KB of nested flow lists (took 2.5 GB)", "nest deeper than 100", nest(40_000, "[", "]")},
		{"200 KB of nested flow lists (crashed out of memory)", "nest deeper than 100", nest(100_000, "[", "]")},
		{"nested flow mappings", "nest deeper than 100", nest(20_000, "{a: ", "}")},
		{"nested block lists by indentation", "nest deeper than 100", []byte(indent.String())},
		{"20 000 compact block entries on one line", "nest deeper than 100", []byte("name: t\nsteps:\n  " + strings.Repeat("- ", 20_000) + "x\n")},
		{"2 million values in one flow list (took 1.7 GB)", "more than 100000 YAML values", []byte("name: t\nsteps: [" + strings.Repeat("1,", 2_000_000) + "1]\n")},
		{"2 MB of block mapping entries", "more than 100000 YAML values", []byte(keys.String())},
		{"brackets in quotes and block scalars do not count", "steps is empty", []byte("name: t\nx: \"" + strings.Repeat("[", 5000) + "\"\ny: |\n  " + strings.Repeat("{", 5000) + "\nsteps: []\n")},
	}
}

// TestHostileCorpus runs every file of testdata/hostile and the generated
// ones through Parse: each must end in an error that says what is wrong,
// at a position, within a time and memory bound.
//
// Measured on a 2-CPU machine: at most 40 ms and 150 MiB allocated (the
// 4 MiB flat list, read once by the prescan and split into lines). The
// memory bound is the verdict; the time bound is a hang guard, 500 times
// the idle figure, since a loaded machine gives a parse a fraction of a
// CPU while an unbounded expansion takes minutes.
func TestHostileCorpus(t *testing.T) {
	files := generatedHostile()
	paths, _ := filepath.Glob("testdata/hostile/*.yaml")
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		first, _, _ := strings.Cut(string(src), "\n")
		want, ok := strings.CutPrefix(first, "# want: ")
		if !ok {
			t.Fatalf("%s: the first line must be # want: TEXT", p)
		}
		files = append(files, hostileFile{filepath.Base(p), want, src})
	}
	for _, f := range files {
		t.Run(f.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			_, err := workflows.Parse("h.yaml", f.src)
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			if took > 20*time.Second {
				t.Errorf("Parse took %v", took)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<30 {
				t.Errorf("Parse allocated %d MiB", alloc>>20)
			}
			var es workflows.Errors
			if !errors.As(err, &es) {
				t.Fatalf("error = %v, want workflows.Errors", err)
			}
			if !strings.Contains(err.Error(), f.want) {
				t.Errorf("error does not say %q:\n%.2000s", f.want, err)
			}
			for _, e := range es {
				if e.Line < 1 || strings.Contains(e.Msg, "internal error") {
					t.Errorf("error without a position, or a panic: %s", e.Msg)
				}
			}
			if !strings.Contains(f.want, "alias") && strings.Contains(err.Error(), "alias") {
				t.Errorf("a file without aliases is said to expand through them:\n%.500s", err)
			}
		})
	}
}

// TestOnlyBoundedRegularFilesAreRead: a workflow or a bare policy file
// that is a FIFO, a device, a directory or over MaxFileSize is refused with
// an error that says which, without blocking on the FIFO or reading the
// device.
func TestOnlyBoundedRegularFilesAreRead(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	w.WriteString("name: t\nsteps: []\n")
	for range (workflows.MaxFileSize / 32) + 1 {
		w.WriteString("# padding padding padding paddi\n")
	}
	w.Flush()
	f.Close()
	for _, tc := range []struct{ path, want string }{
		{fifo, "not a regular file (a named pipe)"},
		{"/dev/zero", "not a regular file (a character device)"},
		{dir, "not a regular file (a directory)"},
		{big, "more than the limit of 4194304 bytes"},
		{filepath.Join(dir, "missing.yaml"), "no such file"},
	} {
		for _, load := range []struct {
			name string
			fn   func(string) error
		}{
			{"Load", func(p string) error { _, err := workflows.Load(p); return err }},
			{"LoadPolicyFile", func(p string) error { _, err := workflows.LoadPolicyFile(p); return err }},
		} {
			t.Run(load.name+" "+filepath.Base(tc.path), func(t *testing.T) {
				done := make(chan error, 1)
				go func() { done <- load.fn(tc.path) }()
				select {
				case err := <-done:
					if err == nil || !strings.Contains(err.Error(), tc.want) {
						t.Errorf("err = %v, want %q", err, tc.want)
					}
				case <-time.After(30 * time.Second): // a hang guard
					t.Fatal("blocked")
				}
			})
		}
	}
}

// TestAByteOrderMarkIsAccepted: editors on Windows write one.
func TestAByteOrderMarkIsAccepted(t *testing.T) {
	src := "\ufeffname: t\nagents: {demo: {builtin: demo}}\nsteps:\n  - {id: a, uses: acp-subagent, with: {agent: demo, prompt: hi}}\n"
	if _, err := workflows.Parse("bom.yaml", []byte(src)); err != nil {
		t.Errorf("workflow: %v", err)
	}
	p := filepath.Join(t.TempDir(), "policy.yaml")
	os.WriteFile(p, []byte("\ufeffpermission: reject\n"), 0o600)
	if _, err := workflows.LoadPolicyFile(p); err != nil {
		t.Errorf("policy file: %v", err)
	}
	// An error on the first line still points at the right column.
	_, err := workflows.Parse("bom.yaml", []byte("\ufeffnmae: t\nsteps: []\n"))
	if err == nil || !strings.Contains(err.Error(), "bom.yaml:1:1: ") {
		t.Errorf("err = %v", err)
	}
}

// TestValidateKnowsTypes: an `if:` whose type is known not to be a
// boolean, and a for-each known not to give a list, are refused at their
// position; what depends on the run passes (issue 11).
func TestValidateKnowsTypes(t *testing.T) {
	const head = "name: t\ninputs:\n  n: {type: number, default: 1}\n  s: {type: string, default: x}\n  b: {type: boolean, default: false}\n  l: {type: array, default: []}\n  o: {type: object, default: {}}\nagents: {demo: {builtin: demo}}\nsteps:\n  - {id: a, uses: acp-subagent, with: {agent: demo, prompt: hi}}\n  - {id: fe, for-each: '[1]', uses: acp-subagent, with: {agent: demo, prompt: hi}}\n"
	step := func(key, expr string) string {
		return head + "  - id: z\n    needs: [a, fe]\n    " + key + ": " + expr + "\n    uses: acp-subagent\n    with: {agent: demo, prompt: hi}\n"
	}
	for _, tc := range []struct{ key, expr, want string }{
		{"if", "steps.a.output", "gives a string"},
		{"if", "steps.a.final", "gives a string"},
		{"if", "steps.a.status", "gives a string"},
		{"if", "inputs.n + 1", "gives a number"},
		{"if", "inputs.s", "gives a string"},
		{"if", "inputs.l", "gives a list"},
		{"if", "inputs.o", "gives a mapping"},
		{"if", "steps.fe.output", "gives a list"},
		{"if", "env.HOME", "gives a string"},
		{"if", "'${{ run.id }}'", "gives a string"},
		{"if", "len(inputs.l)", "gives a number"},
		{"if", "workflow.name + 'x'", "gives a string"},
		{"for-each", "inputs.s", "want a list"},
		{"for-each", "inputs.n", "want a list"},
		{"for-each", "steps.a.output", "want a list"},
		{"for-each", "inputs.b", "want a list"},
		{"if", "steps.a.json.ok", ""},
		{"if", "'!steps.a.json.ok'", ""},
		{"if", "inputs.b", ""},
		{"if", "steps.a.output == 'yes'", ""},
		{"if", "true", ""},
		{"if", "'${{ inputs.n > 0 }}'", ""},
		{"for-each", "1..3", ""},
		{"for-each", "split(inputs.s, ',')", ""},
		{"for-each", "inputs.l", ""},
		{"for-each", "steps.a.json", ""},
		{"for-each", "steps.fe.output", ""},
	} {
		t.Run(tc.key+": "+tc.expr, func(t *testing.T) {
			_, err := workflows.Parse("t.yaml", []byte(step(tc.key, tc.expr)))
			if tc.want == "" {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "t.yaml:14:") {
				t.Errorf("err = %v, want %q at line 14", err, tc.want)
			}
		})
	}
}

// TestUnrenderedAgentKeysRefuseTemplates: command, builtin, preset, cwd
// and auth are used as written, so a ${{ }} in one is an error where it
// is written, not a command named "${{ … }}" at run time.
func TestUnrenderedAgentKeysRefuseTemplates(t *testing.T) {
	for _, kv := range []string{
		`command: "${{ inputs.cmd }}"`,
		`command: "npx-${{ inputs.cmd }}"`,
		`builtin: "${{ inputs.cmd }}"`,
		`preset: "${{ inputs.cmd }}"`,
		`{command: npx, cwd: "${{ inputs.cmd }}"}`,
		`{command: npx, auth: "${{ inputs.cmd }}"}`,
	} {
		t.Run(kv, func(t *testing.T) {
			agent := kv
			if !strings.HasPrefix(kv, "{") {
				agent = "{" + kv + "}"
			}
			src := "name: t\ninputs: {cmd: {type: string, default: x}}\nagents:\n  x: " + agent + "\nsteps:\n  - {id: a, uses: acp-subagent, with: {agent: x, prompt: hi}}\n"
			_, err := workflows.Parse("t.yaml", []byte(src))
			if err == nil || !strings.Contains(err.Error(), "is not rendered here") || !strings.Contains(err.Error(), "t.yaml:4:") {
				t.Errorf("err = %v", err)
			}
		})
	}
}
