package runs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The run ids in an --output file are read from each line's head, however
// long the line; a line that is no result counts nothing, nor does a last
// line cut short (its run is written again), which gets its newline so
// that the next result starts whole; a last line that is whole but for
// its newline counts.
func TestTheRunIDsOfAnOutputFileAreReadFromEachLinesHead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	long := `{"run_id":"r-long","output":"` + strings.Repeat("x", 8<<20) + `"}`
	os.WriteFile(path, []byte(long+"\nnot a result\n"+`{"workflow":"w","run_id":"r-late"}`+"\n"+`{"run_id":"r-torn","outp`), 0o644)
	w, err := OpenOutput(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ids, err := w.Written()
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || !ids["r-long"] {
		t.Errorf("ids %v: want r-long alone (a run id after another key is not a result's, a cut line holds no result)", ids)
	}
	data, _ := os.ReadFile(path)
	if !strings.HasSuffix(string(data), "\"outp\n") {
		t.Errorf("the cut last line did not get its newline: ends %q", data[len(data)-10:])
	}
	os.WriteFile(path, []byte(`{"run_id":"r-whole","status":"succeeded"}`), 0o644)
	if ids, err := w.Written(); err != nil || len(ids) != 1 || !ids["r-whole"] {
		t.Errorf("a whole last line without its newline: ids %v, %v", ids, err)
	}
}
