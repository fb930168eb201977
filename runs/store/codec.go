package store

import (
	"database/sql"
	"encoding/json"
	"fmt"
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
