//go:build race

package wasm_test

// raceEnabled: the race detector slows wazero's own Go code (loading from
// the cache is mostly that) several times, so timing targets do not apply.
const raceEnabled = true
