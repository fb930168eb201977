package runs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/engine"
	_ "github.com/acpflow/acpflow/steps/acpsubagent" // the workflows' step kind
	"github.com/acpflow/acpflow/workflows"
)

// lineWorkflow is a workflow with an input of each type, the one the
// batch line tests resolve lines against.
func lineWorkflow(t testing.TB) *engine.Workflow {
	t.Helper()
	p := filepath.Join(t.TempDir(), "wf.yaml")
	os.WriteFile(p, []byte(`name: lines
inputs:
  n: {type: number, required: true}
  s: {type: string, default: x}
  b: {type: boolean, default: false}
  o: {type: object, default: {}}
  a: {type: array, default: []}
agents:
  demo: {builtin: demo}
steps:
  - {id: one, uses: acp-subagent, with: {agent: demo, prompt: "${{ inputs.n }}"}}
`), 0o644)
	wf, err := workflows.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return wf
}

func TestEveryKindOfBadLineIsItsOwnErrorWithItsLineNumber(t *testing.T) {
	wf := lineWorkflow(t)
	long := `{"n": 1, "s": "` + strings.Repeat("y", MaxLine) + `"}`
	in := strings.Join([]string{
		`{"n": 1}`,                    // 1
		``,                            // 2: blank, passed over
		long,                          // 3
		`{"n": 2`,                     // 4
		`[1, 2]`,                      // 5
		`null`,                        // 6
		`42`,                          // 7
		"{\"n\": 3, \"s\": \"\xff\"}", // 8
		`{"n": "three"}`,              // 9
		`{"s": "no n"}`,               // 10
		`{"n": 1, "zz": 1}`,           // 11
		`{"n": 4} trailing`,           // 12
		"   \t  ",                     // 13: blank
		`{"n": 5}`,                    // 14, no newline at the end
	}, "\n")
	want := map[int]string{
		3: "longer than 16 MiB", 4: "not a JSON object", 5: "an array", 6: "null", 7: "a number",
		8: "not valid UTF-8", 9: "n", 10: "n", 11: "zz", 12: "not a JSON object",
	}
	lr := NewLineReader(strings.NewReader(in), "in.jsonl")
	seen := map[int]bool{}
	for {
		l, err := lr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		seen[l.Line] = true
		bl := resolveLine(wf, "in.jsonl", l)
		if frag, bad := want[l.Line]; bad {
			if bl.err == nil {
				t.Errorf("line %d: no error", l.Line)
				continue
			}
			if prefix := fmt.Sprintf("in.jsonl:%d: ", l.Line); !strings.HasPrefix(bl.err.Error(), prefix) || !strings.Contains(bl.err.Error(), frag) {
				t.Errorf("line %d: error %q, want %q… naming %q", l.Line, bl.err, prefix, frag)
			}
			if len(bl.err.Error()) > 300 {
				t.Errorf("line %d: the error quotes the line (%d bytes)", l.Line, len(bl.err.Error()))
			}
			continue
		}
		if bl.err != nil || bl.inputs == nil {
			t.Errorf("line %d: %v", l.Line, bl.err)
		}
	}
	for n := 1; n <= 14; n++ {
		if blank := n == 2 || n == 13; seen[n] == blank {
			t.Errorf("line %d: read %v, want %v", n, seen[n], !blank)
		}
	}
}

func TestALineOverTheLimitIsReadInBoundedMemory(t *testing.T) {
	// 64 MiB without a newline, then a good line.
	r := io.MultiReader(io.LimitReader(zeros{}, 64<<20), strings.NewReader("\n{\"n\": 1}\n"))
	lr := NewLineReader(r, "big")
	var before, after runtimeMem
	before.read()
	l, err := lr.Next()
	after.read()
	if err != nil || l.Line != 1 || !strings.Contains(l.Error, "longer than 16 MiB") {
		t.Fatalf("first line = %+v, %v", l, err)
	}
	if grew := int64(after.totalAlloc - before.totalAlloc); grew > 3*MaxLine {
		t.Errorf("reading a 64 MiB line allocated %d MiB", grew>>20)
	}
	if l, err := lr.Next(); err != nil || l.Line != 2 || l.Error != "" {
		t.Errorf("the line after = %+v, %v", l, err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// FuzzBatchLine feeds any bytes to the batch line path, from the reader to
// the workflow's inputs: no input may panic, every line is either inputs
// or an error that names the file and the line.
func FuzzBatchLine(f *testing.F) {
	for _, s := range []string{
		`{"n": 1}`, `{"n": 1, "s": "a", "b": true, "o": {"k": [1]}, "a": [null]}`, `[]`, `null`, `"s"`, `1e999`,
		`{"n": 1e400}`, `{"n": NaN}`, "{\"n\": 1}\r\n{\"n\":2}", "\xef\xbb\xbf{\"n\": 1}", `{"n": 1, "n": "x"}`,
		`{"__proto__": 1}`, `{"n": 1}{"n": 2}`, "{\"s\": \"\\ud800\"}", "\x00", `{"o": 1, "n": 1}`,
	} {
		f.Add([]byte(s))
	}
	wf := lineWorkflow(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		lr := NewLineReader(bytes.NewReader(data), "in.jsonl")
		last := 0
		for {
			l, err := lr.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if l.Line <= last {
				t.Fatalf("line %d after line %d", l.Line, last)
			}
			last = l.Line
			bl := resolveLine(wf, "in.jsonl", l)
			switch {
			case bl.err != nil:
				if !strings.HasPrefix(bl.err.Error(), fmt.Sprintf("in.jsonl:%d: ", l.Line)) {
					t.Fatalf("error %q does not name the line", bl.err)
				}
			case bl.inputs == nil:
				t.Fatalf("line %d: neither inputs nor an error", l.Line)
			case (l.Error != "") != (l.Inputs == nil):
				t.Fatalf("line %d: error %q with inputs %v", l.Line, l.Error, l.Inputs)
			}
		}
	})
}

type runtimeMem struct{ totalAlloc uint64 }

func (m *runtimeMem) read() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.totalAlloc = ms.TotalAlloc
}
