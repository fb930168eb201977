package worktree

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// BenchmarkAddCommitRemove is the per-run cost of isolation: worktree on a
// repository of 10,000 files (100 directories of 100): add a worktree with
// a full checkout, commit a small change, remove the worktree and branch.
// "git" does the same with bare git commands, as the baseline that shows
// what the wrapper itself costs.
//
//	go test -run '^$' -bench AddCommitRemove -benchtime 5x ./runs/worktree
func BenchmarkAddCommitRemove(b *testing.B) {
	ctx := context.Background()
	r := newRepo(b)
	for d := range 100 {
		for f := range 100 {
			write(b, filepath.Join(r.Root, "tree", fmt.Sprintf("d%02d", d), fmt.Sprintf("f%02d.txt", f)), fmt.Sprintf("file %d/%d\n", d, f))
		}
	}
	git(b, r.Root, "add", "-A")
	git(b, r.Root, "-c", "gc.auto=0", "commit", "-q", "-m", "10,000 files")
	i := 0
	phases := func(b *testing.B, add, commit, remove func(name string)) {
		var ta, tc, tr time.Duration
		cpu0 := childCPU()
		for b.Loop() {
			i++
			name := fmt.Sprintf("bench%d", i)
			t0 := time.Now()
			add(name)
			t1 := time.Now()
			write(b, filepath.Join(wtPath(r, name), "tree", "d42", "f42.txt"), "changed\n")
			commit(name)
			t2 := time.Now()
			remove(name)
			ta, tc, tr = ta+t1.Sub(t0), tc+t2.Sub(t1), tr+time.Since(t2)
		}
		n := float64(b.N)
		// CPU time of the git processes: unlike the wall times, it does not
		// grow with the load of a shared machine.
		b.ReportMetric(float64((childCPU()-cpu0).Milliseconds())/n, "git-cpu-ms/op")
		b.ReportMetric(float64(ta.Milliseconds())/n, "add-ms/op")
		b.ReportMetric(float64(tc.Milliseconds())/n, "commit-ms/op")
		b.ReportMetric(float64(tr.Milliseconds())/n, "remove-ms/op")
	}
	b.Run("acpflow", func(b *testing.B) {
		wts := map[string]Worktree{}
		phases(b, func(name string) {
			wt, err := r.Add(ctx, wtPath(r, name), BranchPrefix+name, "")
			if err != nil {
				b.Fatal(err)
			}
			wts[name] = wt
		}, func(name string) {
			if c, files, err := r.Commit(ctx, wts[name], "bench"); err != nil || c == "" || len(files) != 1 {
				b.Fatalf("Commit = %q, %q, %v", c, files, err)
			}
		}, func(name string) {
			if err := r.Remove(ctx, wts[name], true); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("git", func(b *testing.B) {
		phases(b, func(name string) {
			git(b, r.Root, "-c", "core.hooksPath=/dev/null", "worktree", "add", "-q", "-b", BranchPrefix+name, wtPath(r, name), "HEAD")
		}, func(name string) {
			git(b, wtPath(r, name), "add", "-A")
			git(b, wtPath(r, name), "-c", "gc.auto=0", "commit", "-q", "-m", "bench")
		}, func(name string) {
			git(b, r.Root, "worktree", "remove", "-f", wtPath(r, name))
			git(b, r.Root, "branch", "-q", "-D", BranchPrefix+name)
		})
	})
}

// childCPU is the user+system time of this process's waited-for children.
func childCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
