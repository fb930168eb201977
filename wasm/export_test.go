package wasm

// PeakRunning is the most calls of m that held a place at once.
func PeakRunning(m *Module) int { return int(m.peak.Load()) }
