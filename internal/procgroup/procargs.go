package procgroup

import (
	"bytes"
	"encoding/binary"
)

// procArgsEnviron returns the environment block of a macOS
// KERN_PROCARGS2 buffer (marker_darwin.go), NUL-separated as Linux's
// /proc/PID/environ is, so that markerIn reads both. nil when the buffer
// is cut short.
//
// # Notes
//
// The buffer is argc (a native int32), the executable's path, NUL padding,
// argc arguments, the environment, an empty string, and then strings the
// kernel adds for the dynamic loader (executable_path=...), which are not
// the environment. It lives in a file of its own, built everywhere, so
// that Linux's tests check the parser macOS uses.
func procArgsEnviron(b []byte) []byte {
	if len(b) < 4 {
		return nil
	}
	argc := int(int32(binary.NativeEndian.Uint32(b)))
	b = b[4:]
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return nil
	}
	b = bytes.TrimLeft(b[i:], "\x00")
	for ; argc > 0; argc-- {
		i := bytes.IndexByte(b, 0)
		if i < 0 {
			return nil
		}
		b = b[i+1:]
	}
	end := 0
	for end < len(b) && b[end] != 0 {
		i := bytes.IndexByte(b[end:], 0)
		if i < 0 {
			end = len(b)
			break
		}
		end += i + 1
	}
	return b[:end]
}
