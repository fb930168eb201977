package acpagent

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MaxSize is the largest size ParseSize accepts: a bound on how much of an
// agent's output acpflow holds in memory for one step.
const MaxSize = 1 << 30

// sizeUnits are the units a size may carry, by their lower-case spelling:
// KB, MB and GB are decimal (as disks and networks count), KiB, MiB and GiB
// binary.
var sizeUnits = map[string]int64{
	"b":  1,
	"kb": 1000, "kib": 1 << 10,
	"mb": 1000 * 1000, "mib": 1 << 20,
	"gb": 1000 * 1000 * 1000, "gib": 1 << 30,
}

const sizeHint = "write a whole number of bytes, or a number with a unit B, KB, KiB, MB, MiB, GB or GiB (e.g. 8 MiB)"

// ParseSize reads a size such as `max-output:` takes: a whole number of
// bytes ("1048576"), or a number with a unit ("8 MiB", "1.5mb", "512KiB").
// It must be greater than 0 and at most MaxSize (1 GiB).
//
// # Notes
//
// Units are case-insensitive and may follow the number after one space;
// KB, MB and GB are powers of 1000, KiB, MiB and GiB powers of 1024. A
// fraction is allowed with a unit and rounds down to whole bytes.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	num := strings.TrimRight(t, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
	unit := strings.ToLower(t[len(num):])
	num = strings.TrimSuffix(num, " ")
	mult := int64(1)
	if unit != "" {
		m, ok := sizeUnits[unit]
		if !ok {
			return 0, fmt.Errorf("%q is not a size: unknown unit %q; %s", s, t[len(t)-len(unit):], sizeHint)
		}
		mult = m
	}
	if rest, neg := strings.CutPrefix(num, "-"); neg && rest != "" && digits(strings.Replace(rest, ".", "", 1)) {
		return 0, fmt.Errorf("a size must be greater than 0, got %s", t)
	}
	whole, frac, hasFrac := strings.Cut(num, ".")
	if whole == "" && frac == "" || !digits(whole) || !digits(frac) || hasFrac && frac == "" {
		return 0, fmt.Errorf("%q is not a size; %s", s, sizeHint)
	}
	if hasFrac && unit == "" {
		return 0, fmt.Errorf("%q is not a whole number of bytes; %s", s, sizeHint)
	}
	w := int64(0)
	if whole != "" {
		v, err := strconv.ParseInt(whole, 10, 64)
		if err != nil || v > MaxSize {
			return 0, fmt.Errorf("%s is too large: a size is at most 1 GiB (%d bytes)", strings.TrimSpace(s), int64(MaxSize))
		}
		w = v
	}
	n := w * mult
	if frac != "" {
		// Enough digits for a byte of a GB; the rest cannot change the result.
		if len(frac) > 9 {
			frac = frac[:9]
		}
		f, _ := strconv.ParseInt(frac, 10, 64)
		n += f * mult / int64(math.Pow10(len(frac)))
	}
	return checkSize(n, strings.TrimSpace(s))
}

// SizeOf reads a size from a value of a workflow file: a whole number of
// bytes (a YAML integer) or a string for ParseSize. It is what reads a
// rendered `with.max-output`.
func SizeOf(v any) (int64, error) {
	switch x := v.(type) {
	case int:
		return checkSize(int64(x), strconv.Itoa(x))
	case int64:
		return checkSize(x, strconv.FormatInt(x, 10))
	case string:
		return ParseSize(x)
	case float64:
		if x == math.Trunc(x) && x > MaxSize {
			return 0, fmt.Errorf("%s is too large: a size is at most 1 GiB (%d bytes)", strconv.FormatFloat(x, 'g', -1, 64), int64(MaxSize))
		}
		return 0, fmt.Errorf("%s is not a whole number of bytes; %s", strconv.FormatFloat(x, 'g', -1, 64), sizeHint)
	}
	return 0, fmt.Errorf("want a size, got %T; %s", v, sizeHint)
}

func checkSize(n int64, written string) (int64, error) {
	switch {
	case n <= 0:
		return 0, fmt.Errorf("a size must be greater than 0, got %s", written)
	case n > MaxSize:
		return 0, fmt.Errorf("%s is too large: a size is at most 1 GiB (%d bytes)", written, int64(MaxSize))
	}
	return n, nil
}

func digits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
