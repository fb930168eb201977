package wasm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// versionMember is the ABI version acpflow adds to every request.
const versionMember = `"version":1`

// withVersion returns request with "version": 1 as its first member,
// spliced in. A request that already has a top-level "version" is decoded
// and encoded again with the member replaced, never duplicated: a guest
// must not have to guess which of two it should believe.
func withVersion(request []byte) ([]byte, error) {
	request = bytes.TrimSpace(request)
	if len(request) == 0 || request[0] != '{' || !json.Valid(request) {
		return nil, errors.New("not a JSON object")
	}
	if bytes.Contains(request, []byte(`"version"`)) {
		var members map[string]json.RawMessage
		if err := json.Unmarshal(request, &members); err != nil {
			return nil, err
		}
		if _, ok := members["version"]; ok {
			members["version"] = json.RawMessage(versionMember[len(`"version":`):])
			// Not json.Marshal: it would escape "&&" to "\u0026\u0026"
			// inside the other members, and guests may match bytes.
			return EncodeJSON(members)
		}
	}
	rest := bytes.TrimLeft(request[1:], " \t\r\n")
	out := make([]byte, 0, len(request)+len(versionMember)+1)
	out = append(out, '{')
	out = append(out, versionMember...)
	if rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, rest...), nil
}

// checkAnswer makes sure the answer is one JSON object and trims it.
func checkAnswer(answer []byte) ([]byte, error) {
	answer = bytes.TrimSpace(answer)
	switch {
	case len(answer) == 0:
		return nil, errors.New("answered nothing")
	case answer[0] != '{' || !json.Valid(answer):
		return nil, fmt.Errorf("answer is not a JSON object: %s", excerpt(answer))
	}
	return answer, nil
}

// excerpt quotes the start of a bad answer for an error message.
func excerpt(b []byte) string {
	const n = 80
	if len(b) > n {
		return fmt.Sprintf("%q…", b[:n])
	}
	return fmt.Sprintf("%q", b)
}

// EncodeJSON encodes v without encoding/json's HTML escaping, so that
// "make && rm -rf x" reaches a module as written, not as
// "make \u0026\u0026 rm -rf x": a guest that matches bytes (the WAT example
// does) must see the characters the agent sent.
func EncodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
