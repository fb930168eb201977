//go:build !linux

package wasm

// mapMemory is Linux's only: elsewhere an instance's memory is a Go slice,
// left to the collector when the instance ends.
func mapMemory(uint64) ([]byte, bool) { return nil, false }

func zeroMapped([]byte) bool { return false }

func unmapMemory([]byte) {}
