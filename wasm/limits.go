package wasm

import (
	"fmt"
	"runtime"
	"time"
)

// Defaults of Limits (docs/wasm.md).
const (
	DefaultMemory  = 32 << 20 // bytes of linear memory per instance
	DefaultTimeout = time.Second
	DefaultOutput  = 1 << 20 // bytes of answer
	DefaultStderr  = 16 << 10
)

// maxInstances bounds Limits.Instances: far more than a machine runs at once.
const maxInstances = 1024

// DefaultInstances is how many calls of one module run at once, unless
// its Limits say otherwise: one per CPU acpflow may use, at most 4. Guests
// compute and never wait (their stdin and stdout are memory), so more at
// once would not answer sooner, and each holds an instance's memory.
func DefaultInstances() int { return max(1, min(runtime.GOMAXPROCS(0), 4)) }

// pageSize is the size of a WebAssembly memory page.
const pageSize = 64 << 10

// maxMemory is the most a 32-bit WebAssembly memory can address.
const maxMemory = 1 << 32

// Limits bound one call of a policy module. The zero value of each field
// means its default.
type Limits struct {
	Memory  uint64        // bytes of linear memory an instance may grow to; default 32 MiB
	Timeout time.Duration // wall time of one call, instantiation included; default 1s
	Output  int           // bytes of answer on stdout; default 1 MiB
	Stderr  int           // bytes of stderr kept per call (the rest is dropped); default 16 KiB
	// Instances is how many calls of the module run at once, each in an
	// instance of its own; the rest wait in line (see Module.Call). It
	// bounds the module's memory by Instances × Memory whatever the number
	// of requests in flight. Default DefaultInstances().
	Instances int
}

// resolve fills in the defaults and checks the rest. It is the one place
// where limits are validated, so its errors have one call site: Load.
func (l Limits) resolve() (Limits, error) {
	if l.Memory == 0 {
		l.Memory = DefaultMemory
	}
	if l.Timeout == 0 {
		l.Timeout = DefaultTimeout
	}
	if l.Output == 0 {
		l.Output = DefaultOutput
	}
	if l.Stderr == 0 {
		l.Stderr = DefaultStderr
	}
	if l.Instances == 0 {
		l.Instances = DefaultInstances()
	}
	switch {
	case l.Memory < pageSize:
		return l, fmt.Errorf("memory limit %d bytes: want at least one 64 KiB page", l.Memory)
	case l.Memory > maxMemory:
		return l, fmt.Errorf("memory limit %d bytes: want at most 4 GiB", l.Memory)
	case l.Timeout < 0:
		return l, fmt.Errorf("timeout %s: want a positive duration", l.Timeout)
	case l.Output < 0:
		return l, fmt.Errorf("output limit %d bytes: want a positive size", l.Output)
	case l.Stderr < 0:
		return l, fmt.Errorf("stderr limit %d bytes: want a positive size", l.Stderr)
	case l.Instances < 0 || l.Instances > maxInstances:
		return l, fmt.Errorf("instances %d: want from 1 to %d calls at once", l.Instances, maxInstances)
	}
	l.Memory -= l.Memory % pageSize // memory grows in whole pages
	return l, nil
}
