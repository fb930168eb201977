package wasm

import "syscall"

// mapMemory reserves size bytes of address space for a linear memory:
// private, anonymous, not counted against the system's commit limit, its
// pages resident only once the guest touches them.
func mapMemory(size uint64) ([]byte, bool) {
	if size == 0 || size > maxMemory || uint64(int(size)) != size {
		return nil, false
	}
	buf, err := syscall.Mmap(-1, 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
	return buf, err == nil
}

// zeroMapped gives the pages of the part of a mapping a guest used back to
// the system: they read as zero on the next touch (MADV_DONTNEED on a
// private anonymous mapping). false when it could not, and the mapping
// must not be used again.
func zeroMapped(buf []byte) bool {
	if len(buf) == 0 {
		return true
	}
	return syscall.Madvise(buf, syscall.MADV_DONTNEED) == nil
}

// unmapMemory ends a mapping of mapMemory's.
func unmapMemory(buf []byte) { _ = syscall.Munmap(buf[:cap(buf)]) }
