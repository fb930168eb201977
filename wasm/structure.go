package wasm

import "fmt"

// MaxBlocks is the most blocks, loops, ifs and elses that one function of
// a policy module may have. wazero's compiler takes time quadratic in the
// number of blocks of a function (its dominator and loop passes), and it
// does not look at its context while it compiles one function. Measured
// here (wazero v1.12.0): 10,000 blocks 0.8–1.7 s, 20,000 blocks 2.5–4.9 s,
// 100,000 blocks (300 KB) over two minutes, nested or not. Compilers write
// far fewer: the largest function of the Go example (3 MB) has 799, of the
// C, Rust and AssemblyScript examples under 300.
const MaxBlocks = 10_000

// checkStructure walks the code section of bin and refuses a function with
// more than MaxBlocks blocks, before wazero spends minutes compiling it.
// It reads only what it needs to find blocks; anything it does not
// understand (an opcode of a proposal it does not know, a truncated body)
// ends its walk of that function without an error, because wazero's own
// validation, which follows, is the judge of what is valid. A module it
// cannot walk is still bounded by the compile time limit.
func checkStructure(bin []byte) error {
	_, err := mostBlocks(bin)
	return err
}

// mostBlocks is checkStructure's walk; it also returns the most blocks of
// any one function it walked.
func mostBlocks(bin []byte) (int, error) {
	r := reader{b: bin, at: 8}
	for r.at < len(r.b) {
		id, ok := r.byte()
		size, ok2 := r.u32()
		if !ok || !ok2 || uint64(r.at)+uint64(size) > uint64(len(r.b)) {
			return 0, nil // wazero says what is wrong
		}
		body := r.b[r.at : r.at+int(size)]
		r.at += int(size)
		if id == 10 { // the code section
			return checkCode(body)
		}
	}
	return 0, nil
}

func checkCode(section []byte) (int, error) {
	r := reader{b: section}
	n, ok := r.u32()
	if !ok {
		return 0, nil
	}
	most := 0
	for i := uint32(0); i < n; i++ {
		size, ok := r.u32()
		if !ok || uint64(r.at)+uint64(size) > uint64(len(r.b)) {
			return most, nil
		}
		body := reader{b: r.b[r.at : r.at+int(size)]}
		r.at += int(size)
		blocks := body.blocks()
		if blocks > MaxBlocks {
			return blocks, fmt.Errorf("function %d has more than %d blocks: no compiler writes that many, and compiling them would take minutes", i, MaxBlocks)
		}
		most = max(most, blocks)
	}
	return most, nil
}

// blocks walks one function body and counts its blocks, loops, ifs and
// elses, stopping once the count passes MaxBlocks.
func (r *reader) blocks() int {
	groups, ok := r.u32()
	if !ok {
		return 0
	}
	for i := uint32(0); i < groups; i++ { // locals: count and type
		if !r.skipU32(1) || !r.skipBytes(1) {
			return 0
		}
	}
	n := 0
	for r.at < len(r.b) && n <= MaxBlocks {
		op, _ := r.byte()
		switch {
		case op == 0x02 || op == 0x03 || op == 0x04: // block, loop, if
			if !r.skipLEB() { // the block type: 0x40, a value type or a type index
				return n
			}
			n++
		case op == 0x05: // else
			n++
		case op == 0x0b: // end
		case !r.immediates(op):
			return n // not ours to judge
		}
	}
	return n
}

// immediates skips the immediates of op; false means op is unknown or its
// immediates are cut short.
func (r *reader) immediates(op byte) bool {
	switch {
	case op == 0x00 || op == 0x01 || op == 0x0f || op == 0x1a || op == 0x1b || op == 0xd1:
		return true // unreachable, nop, else, return, drop, select, ref.is_null
	case op >= 0x45 && op <= 0xc4:
		return true // numeric instructions, sign extension included
	case op == 0x0c || op == 0x0d || op == 0x10 || op == 0xd2 || (op >= 0x20 && op <= 0x26):
		return r.skipU32(1) // br, br_if, call, ref.func, local.*, global.*, table.get/set
	case op == 0x11:
		return r.skipU32(2) // call_indirect
	case op == 0x0e: // br_table
		n, ok := r.u32()
		return ok && r.skipU32(uint64(n)+1)
	case op == 0x1c: // select t*
		n, ok := r.u32()
		return ok && r.skipBytes(uint64(n))
	case op >= 0x28 && op <= 0x3e:
		return r.skipU32(2) // memory access: align, offset
	case op == 0x3f || op == 0x40:
		return r.skipBytes(1) // memory.size, memory.grow
	case op == 0x41 || op == 0x42:
		return r.skipLEB() // i32.const, i64.const
	case op == 0x43:
		return r.skipBytes(4)
	case op == 0x44:
		return r.skipBytes(8)
	case op == 0xd0:
		return r.skipBytes(1) // ref.null t
	case op == 0xfc:
		return r.prefixedFC()
	case op == 0xfd:
		return r.prefixedFD()
	}
	return false
}

func (r *reader) prefixedFC() bool {
	sub, ok := r.u32()
	switch {
	case !ok:
		return false
	case sub <= 7:
		return true // saturating truncations
	case sub == 8: // memory.init
		return r.skipU32(1) && r.skipBytes(1)
	case sub == 9 || sub == 13 || (sub >= 15 && sub <= 17):
		return r.skipU32(1) // data.drop, elem.drop, table.grow/size/fill
	case sub == 10:
		return r.skipBytes(2) // memory.copy
	case sub == 11:
		return r.skipBytes(1) // memory.fill
	case sub == 12 || sub == 14:
		return r.skipU32(2) // table.init, table.copy
	}
	return false
}

func (r *reader) prefixedFD() bool {
	sub, ok := r.u32()
	switch {
	case !ok:
		return false
	case sub <= 11 || sub == 92 || sub == 93:
		return r.skipU32(2) // loads and stores: memarg
	case sub == 12 || sub == 13:
		return r.skipBytes(16) // v128.const, i8x16.shuffle
	case sub >= 21 && sub <= 34:
		return r.skipBytes(1) // extract and replace lane
	case sub >= 84 && sub <= 91:
		return r.skipU32(2) && r.skipBytes(1) // load and store lane
	case sub <= 275:
		return true // the rest take no immediates
	}
	return false
}

// reader reads the parts of a WASM binary that checkStructure needs.
type reader struct {
	b  []byte
	at int
}

func (r *reader) byte() (byte, bool) {
	if r.at >= len(r.b) {
		return 0, false
	}
	r.at++
	return r.b[r.at-1], true
}

func (r *reader) u32() (uint32, bool) {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		b, ok := r.byte()
		if !ok {
			return 0, false
		}
		v |= uint32(b&0x7f) << shift
		if b&0x80 == 0 {
			return v, true
		}
	}
	return 0, false
}

func (r *reader) skipLEB() bool {
	for i := 0; i < 10; i++ {
		b, ok := r.byte()
		if !ok {
			return false
		}
		if b&0x80 == 0 {
			return true
		}
	}
	return false
}

func (r *reader) skipU32(n uint64) bool {
	for ; n > 0; n-- {
		if _, ok := r.u32(); !ok {
			return false
		}
	}
	return true
}

func (r *reader) skipBytes(n uint64) bool {
	if uint64(len(r.b)-r.at) < n {
		return false
	}
	r.at += int(n)
	return true
}
