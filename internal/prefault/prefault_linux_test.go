package prefault

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// By the time main runs, every page of the heap's first chunk is resident:
// allocations there fault no more.
func TestTheHeapsFirstChunkIsResidentAfterInit(t *testing.T) {
	base := uintptr(unsafe.Pointer(first)) &^ (heapChunk - 1)
	vec := make([]byte, heapChunk/unix.Getpagesize())
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, base, heapChunk, uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	missing := 0
	for _, v := range vec {
		if v&1 == 0 {
			missing++
		}
	}
	// The runtime may have returned a few pages it freed since
	// (scavenging); a chunk faulted in one page at a time would miss
	// most of them.
	if missing > len(vec)/10 {
		t.Errorf("%d of the first chunk's %d pages are not resident", missing, len(vec))
	}
}
