package store

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// timeLayout is how times are stored: UTC, fixed width (nanoseconds always
// written), so that TEXT order is time order; SQLite's date functions read it.
const timeLayout = "2006-01-02T15:04:05.000000000Z"

// timeArg is t as a column value; the zero time is NULL ("not yet").
func timeArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(timeLayout)
}

// parseTime reads a time column; NULL is the zero time.
func parseTime(v sql.NullString) (time.Time, error) {
	if !v.Valid {
		return time.Time{}, nil
	}
	t, err := time.Parse(timeLayout, v.String)
	if err != nil {
		return time.Time{}, fmt.Errorf("bad time %q in store: %w", v.String, err)
	}
	return t, nil
}

// jsonArg is v as a JSON column value.
func jsonArg(what string, v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode %s: %w", what, err)
	}
	return string(b), nil
}

// orderedObject encodes m as a JSON object whose members come in the
// order of names, then any other in name order: a map has no order, and
// the outputs' is the workflow file's. A nil m is null, as jsonArg has it.
func orderedObject(what string, m map[string]any, names []string) (string, error) {
	if m == nil || len(names) == 0 {
		return jsonArg(what, m)
	}
	var b strings.Builder
	b.WriteByte('{')
	seen := make(map[string]bool, len(m))
	add := func(k string) error {
		v, err := json.Marshal(m[k])
		if err != nil {
			return fmt.Errorf("encode %s: %w", what, err)
		}
		key, _ := json.Marshal(k)
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.Write(key)
		b.WriteByte(':')
		b.Write(v)
		seen[k] = true
		return nil
	}
	for _, k := range names {
		if _, ok := m[k]; ok && !seen[k] {
			if err := add(k); err != nil {
				return "", err
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !seen[k] {
			if err := add(k); err != nil {
				return "", err
			}
		}
	}
	b.WriteByte('}')
	return b.String(), nil
}

// objectKeys is the names of the members of the JSON object s, in the
// order s writes them; nil when s is not an object.
func objectKeys(s string) []string {
	dec := json.NewDecoder(strings.NewReader(s))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil
		}
		k, _ := t.(string)
		keys = append(keys, k)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil
		}
	}
	return keys
}

// parseMap reads a JSON object column ("null" is a nil map).
func parseMap(what, s string) (map[string]any, error) {
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("decode %s: %w", what, err)
	}
	return m, nil
}

// nullString is s as a column value, NULL when empty (optional references).
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// nullInt is n as a column value, NULL when zero.
func nullInt(n int) any {
	if n == 0 {
		return nil
	}
	return n
}
