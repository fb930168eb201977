package wasm

import (
	"errors"
	"fmt"

	"github.com/tetratelabs/wazero/experimental"
)

// errAnswerTooLarge is what a guest's write to stdout gets (as EIO) once its
// answer would pass the output limit; the call then fails whatever the guest
// does next.
var errAnswerTooLarge = errors.New("answer over the output limit")

// answerBuffer captures stdout up to a limit. It never holds more than the
// limit: a write that would pass it is refused whole and recorded, so a
// guest printing 100 MiB costs acpflow at most the limit.
type answerBuffer struct {
	buf      []byte
	limit    int
	overflow bool
}

func (b *answerBuffer) Write(p []byte) (int, error) {
	if b.overflow || len(b.buf)+len(p) > b.limit {
		b.overflow = true
		return 0, errAnswerTooLarge
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

// stderrBuffer keeps the first limit bytes of stderr and counts the rest.
// The head is kept rather than the tail because guests' runtimes print the
// cause first (Go's "panic: ...", Rust's "thread 'main' panicked at ...")
// and a trace after it. Writes never fail: stderr must not change what a
// guest decides.
type stderrBuffer struct {
	buf     []byte
	limit   int
	dropped int
}

func (b *stderrBuffer) Write(p []byte) (int, error) {
	n := min(len(p), b.limit-len(b.buf))
	b.buf = append(b.buf, p[:n]...)
	b.dropped += len(p) - n
	return len(p), nil
}

func (b *stderrBuffer) String() string {
	if b.dropped == 0 {
		return string(b.buf)
	}
	return fmt.Sprintf("%s\n[%d more bytes of stderr dropped]", b.buf, b.dropped)
}

func (b *stderrBuffer) reset() {
	b.buf, b.dropped = b.buf[:0], 0
}

// memoryLimit is a wazero memory allocator that refuses to grow past limit
// and remembers that it did, so that the error of a guest that then traps or
// exits can say why. One serves one instance.
//
// It replaces RuntimeConfig.WithMemoryLimitPages, which is per runtime and
// silent: with it, each Load can have its own limit on one runtime, and a
// module that declares a large maximum still compiles.
//
// Where the system allows (mapMemory), an instance's memory is a mapping of
// its own, as large as the limit and never copied as it grows, whose pages
// are given back to the system (and read as zero again) when the instance
// ends; the mapping is then kept for the module's next instance (spare).
// Elsewhere it is a Go slice, left to the collector.
type memoryLimit struct {
	limit   uint64
	refused bool
	// spare, when set, is where mappings are taken from and given back to
	// (Module.spare).
	spare chan []byte
}

func (a *memoryLimit) Allocate(capacity, _ uint64) experimental.LinearMemory {
	if a.spare != nil {
		select {
		case buf := <-a.spare:
			return &limitedMemory{owner: a, buf: buf[:0], mapped: true}
		default:
		}
		if buf, ok := mapMemory(a.limit); ok {
			return &limitedMemory{owner: a, buf: buf[:0], mapped: true}
		}
	}
	return &limitedMemory{owner: a, buf: make([]byte, 0, min(capacity, a.limit))}
}

type limitedMemory struct {
	owner  *memoryLimit
	buf    []byte
	mapped bool // buf is a mapping of mapMemory's
}

// Reallocate grows the memory to size bytes, or returns nil (memory.grow
// answers -1) past the limit. Capacity doubles, up to the limit, so a guest
// growing page by page is not copied page by page.
func (m *limitedMemory) Reallocate(size uint64) []byte {
	if size > m.owner.limit {
		m.owner.refused = true
		return nil
	}
	if size <= uint64(cap(m.buf)) {
		// Bytes past the old length were never written (memory never
		// shrinks), so they are still zero as WebAssembly requires.
		m.buf = m.buf[:size]
		return m.buf
	}
	grown := make([]byte, size, max(size, min(2*uint64(cap(m.buf)), m.owner.limit)))
	copy(grown, m.buf)
	m.buf = grown
	return m.buf
}

// Free ends the memory. A mapping's pages go back to the system, and the
// mapping is kept for another instance of the module (or unmapped when
// enough are spare).
func (m *limitedMemory) Free() {
	buf := m.buf
	m.buf = nil
	if !m.mapped || buf == nil {
		return
	}
	if !zeroMapped(buf) {
		unmapMemory(buf)
		return
	}
	select {
	case m.owner.spare <- buf[:0]:
	default:
		unmapMemory(buf)
	}
}
