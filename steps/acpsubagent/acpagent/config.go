package acpagent

import (
	"fmt"
	"strconv"
)

// ConfigValue reads the value of one `config:` option as the ACP value id
// session/set_config_option takes: a string as is, a boolean as "true" or
// "false". Anything else (a number, a list, a mapping, null) is an error:
// a value id that looks like a number must be quoted in the file.
func ConfigValue(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case nil:
		return "", fmt.Errorf("want a value id (a string) or true/false, got nothing")
	case map[string]any:
		return "", fmt.Errorf("want a value id (a string) or true/false, got a mapping")
	case []any:
		return "", fmt.Errorf("want a value id (a string) or true/false, got a list")
	case int, int64, float64:
		return "", fmt.Errorf("want a value id (a string) or true/false, got the number %v; quote it if the agent's value id is %q", x, fmt.Sprint(x))
	}
	return "", fmt.Errorf("want a value id (a string) or true/false, got %T", v)
}
