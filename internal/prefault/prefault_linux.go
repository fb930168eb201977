package prefault

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// heapChunk is the unit in which the Go runtime maps its heap
// (pallocChunkBytes, 4 MiB on 64-bit Linux): the chunk that holds a heap
// object is mapped read-write whole, so faulting it in cannot meet a hole.
const heapChunk = 4 << 20

// first is allocated by this package's init, among the first allocations
// of the process: it lies in the heap's first chunk.
var first *[64]byte

func init() {
	first = new([64]byte)
	base := uintptr(unsafe.Pointer(first)) &^ (heapChunk - 1)
	// Errors are ignored: an older kernel (MADV_POPULATE_WRITE is Linux
	// 5.14), or a runtime that maps its heap otherwise, only leaves the
	// pages to fault in one by one, as they would have.
	unix.Syscall(unix.SYS_MADVISE, base, heapChunk, unix.MADV_POPULATE_WRITE)
}
