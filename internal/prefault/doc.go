// Package prefault faults the first chunk of the Go heap in with one
// system call when acpflow starts. The main package imports it for its
// effect; it imports almost nothing, so Go initialises it before most
// packages, whose init then allocates in pages already there.
//
// # Notes
//
// A one-step `acpflow run` touches about 2 MiB of fresh heap (its
// packages' init, the workflow, SQLite's statements, the agent's JSON),
// one page fault per 4 KiB page. On the virtual machines acpflow is
// measured on (2 cores, paravirtualised memory) a fault costs about 11 µs,
// against under 1 µs a page for MADV_POPULATE_WRITE: about 550 faults
// were 6 ms of a 50 ms run (issue 28; `perf stat -e page-faults`). On
// bare metal, where a fault costs a fraction of a microsecond, the two
// cost about the same. The price is memory: the chunk's 4 MiB are
// resident from the start, about 2 MiB more than a one-step run touches
// (peak RSS 22 → 25 MB).
//
// Only the heap is populated: the executable's data segment (2 MiB of
// copy-on-write pages, of which a run writes about 60) and its text (read
// in 64 KiB around each fault) would cost more memory, or copying, than
// their faults.
package prefault
