package wasm

// PeakRunning is the most calls of m that held a place at once.
func PeakRunning(m *Module) int { return int(m.peak.Load()) }

// FreeInstanceMemory is how many bytes of h's instance budget no call
// holds: a test waits for it to be 0 to know that a call is in flight.
func FreeInstanceMemory(h *Host) uint64 {
	h.instances.mu.Lock()
	defer h.instances.mu.Unlock()
	return h.instances.free
}
