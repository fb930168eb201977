package wasmpolicy

import (
	"encoding/json"
	"maps"
	"testing"

	"github.com/acpflow/acpflow/policies"
)

// FuzzWASMAnswer: the decoders of a module's answer never panic, and
// whatever they accept means the same to any JSON decoder: encoding/json,
// which takes the last of two members, reads the same decision, reason,
// environment or refusal; and the accepted answer, encoded again, decodes
// to itself.
func FuzzWASMAnswer(f *testing.F) {
	for _, seed := range []string{
		`{"decision":"allow","reason":"a read"}`,
		`{"decision":"reject","Decision":"allow"}`,
		`{"decision":"reject","decision":"allow"}`,
		`{"decision":"reject","\u0064ecision":"allow"}`,
		`{"decision":"cancel","reason":null}`,
		`{"decision":null}`,
		`{"env":{"HOME":"/h","PATH":"/bin"}}`,
		`{"env":{"PATH":"/bin","PATH":"/tmp"}}`,
		`{"env":{},"Env":{"X":"1"}}`,
		`{"deny":"no"}`,
		`{"deny":"no","env":null}`,
		`{"env":{"A":"1"}} {}`,
		`[]`, `{`, `{"reaſon":"x","decision":"allow"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, answer []byte) {
		if d, reason, err := decodePermissionAnswer(answer); err == nil {
			var loose struct {
				Decision string `json:"decision"`
				Reason   string `json:"reason"`
			}
			if err := json.Unmarshal(answer, &loose); err != nil || policies.Decision(loose.Decision) != d || loose.Reason != reason {
				t.Fatalf("accepted %s as %s %q; encoding/json reads %+v, %v", answer, d, reason, loose, err)
			}
			again, _ := json.Marshal(map[string]string{"decision": string(d), "reason": reason})
			if d2, r2, err := decodePermissionAnswer(again); err != nil || d2 != d || r2 != reason {
				t.Fatalf("%s re-encoded as %s decodes to %s %q, %v", answer, again, d2, r2, err)
			}
		}
		if env, deny, err := decodeEnvAnswer(answer); err == nil {
			var loose struct {
				Env  map[string]string `json:"env"`
				Deny string            `json:"deny"`
			}
			if err := json.Unmarshal(answer, &loose); err != nil || loose.Deny != deny || !maps.Equal(loose.Env, env) {
				t.Fatalf("accepted %s as env %v deny %q; encoding/json reads %+v, %v", answer, env, deny, loose, err)
			}
			if (env == nil) == (deny == "") {
				t.Fatalf("accepted %s as env %v deny %q: want exactly one", answer, env, deny)
			}
			var again []byte
			if deny != "" {
				again, _ = json.Marshal(map[string]string{"deny": deny})
			} else {
				again, _ = json.Marshal(map[string]map[string]string{"env": env})
			}
			if env2, deny2, err := decodeEnvAnswer(again); err != nil || deny2 != deny || !maps.Equal(env2, env) {
				t.Fatalf("%s re-encoded as %s decodes to %v %q, %v", answer, again, env2, deny2, err)
			}
		}
	})
}
