package workflows

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
)

// baseSchema is the loader's part of the workflow schema: everything but
// the step kinds, whose `with:` each kind describes itself (Kind.Schema).
//
//go:embed schema-base.json
var baseSchema []byte

// Schema returns the JSON schema (draft-07) of the workflow file, for
// editors, with the `with:` of every registered step kind. schema.json is
// its output for the kinds acpflow ships; a file that starts with
//
//	# yaml-language-server: $schema=https://raw.githubusercontent.com/acpflow/acpflow/main/workflows/schema.json
//
// (or a relative path to schema.json) gets completion, descriptions and
// checks of keys and types as it is typed.
//
// # Notes
//
// The schema can only check the shape of the file. References between
// steps, cycles in needs and expressions are checked by Parse, which is the
// authority: a file the schema accepts may still fail validation, never
// the other way round for the keys and types both check.
func Schema() ([]byte, error) {
	var kinds []steps.Kind
	for _, name := range steps.Names() {
		k, _ := steps.Lookup(name)
		kinds = append(kinds, k)
	}
	return SchemaOf(kinds)
}

// SchemaOf returns the workflow schema with the given kinds, in their
// order: `uses:` names them, and each kind's `with:` schema becomes the
// definition of its name, required when the kind requires keys.
//
// # Notes
//
// The loader's keys keep the order they have in schema-base.json, so the
// output is stable text that a test compares with schema.json.
func SchemaOf(kinds []steps.Kind) ([]byte, error) {
	root, err := parseObject(baseSchema)
	if err != nil {
		return nil, fmt.Errorf("schema-base.json: %w", err)
	}
	defs, err := parseObject(root.get("definitions"))
	if err != nil {
		return nil, fmt.Errorf("schema-base.json: definitions: %w", err)
	}
	step, err := parseObject(defs.get("step"))
	if err != nil {
		return nil, fmt.Errorf("schema-base.json: step: %w", err)
	}
	props, err := parseObject(step.get("properties"))
	if err != nil {
		return nil, fmt.Errorf("schema-base.json: step.properties: %w", err)
	}
	uses, err := parseObject(props.get("uses"))
	if err != nil {
		return nil, fmt.Errorf("schema-base.json: step.properties.uses: %w", err)
	}
	names := make([]string, 0, len(kinds))
	withs := make([]json.RawMessage, 0, len(kinds))
	for _, k := range kinds {
		name := k.Name()
		if defs.get(name) != nil {
			return nil, fmt.Errorf("step kind %q: the workflow schema has a definition of that name already", name)
		}
		frag := k.Schema()
		if !json.Valid(frag) {
			return nil, fmt.Errorf("step kind %q: its with: schema is not JSON", name)
		}
		names = append(names, name)
		defs.set(name, frag)
		withs = append(withs, mustJSON(kindRule(name, len(k.Required()) > 0)))
	}
	uses.set("enum", mustJSON(names))
	props.set("uses", uses.marshal())
	step.set("properties", props.marshal())
	step.set("allOf", mustJSON(withs))
	defs.set("step", step.marshal())
	if err := addForms(&defs, policies.Forms()); err != nil {
		return nil, err
	}
	root.set("definitions", defs.marshal())

	var out bytes.Buffer
	if err := json.Indent(&out, root.marshal(), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// addForms composes the policy forms' keys into the permission and env
// definitions: a permission is one more alternative per form (its key
// required, beside the settings every permission takes), an env mapping
// takes each form's keys.
func addForms(defs *object, forms []policies.FormInfo) error {
	perm, err := parseObject(defs.get("permission"))
	if err != nil {
		return fmt.Errorf("schema-base.json: permission: %w", err)
	}
	var alts []json.RawMessage
	if err := json.Unmarshal(perm.get("oneOf"), &alts); err != nil || len(alts) == 0 {
		return fmt.Errorf("schema-base.json: permission.oneOf: want the alternatives")
	}
	rules, err := parseObject(alts[len(alts)-1])
	if err != nil {
		return fmt.Errorf("schema-base.json: permission.oneOf: %w", err)
	}
	settings, err := parseObject(rules.get("properties"))
	if err != nil {
		return fmt.Errorf("schema-base.json: the rules permission's properties: %w", err)
	}
	env, err := parseObject(defs.get("env"))
	if err != nil {
		return fmt.Errorf("schema-base.json: env: %w", err)
	}
	envProps, err := parseObject(env.get("properties"))
	if err != nil {
		return fmt.Errorf("schema-base.json: env.properties: %w", err)
	}
	for _, f := range forms {
		keys, err := parseObject(f.Schema)
		if err != nil || keys.get(f.Key) == nil {
			return fmt.Errorf("policy form %q: its schema is no object with a member %q", f.Key, f.Key)
		}
		props := object{{f.Key, keys.get(f.Key)}}
		for _, k := range []string{"ask-fallback", "ask-timeout", "unasked", "config"} {
			props.set(k, settings.get(k))
		}
		envProps.insertBefore("config", f.Key, keys.get(f.Key))
		for _, k := range f.Keys {
			if keys.get(k) == nil {
				return fmt.Errorf("policy form %q: its schema has no member %q", f.Key, k)
			}
			props.set(k, keys.get(k))
			envProps.set(k, keys.get(k))
		}
		alts = append(alts, mustJSON(formAlternative{f.Description, "object", false, []string{f.Key}, props.marshal()}))
	}
	perm.set("oneOf", mustJSON(alts))
	defs.set("permission", perm.marshal())
	env.set("properties", envProps.marshal())
	defs.set("env", env.marshal())
	return nil
}

// formAlternative is a permission written in one policy form.
type formAlternative struct {
	Description          string          `json:"description,omitempty"`
	Type                 string          `json:"type"`
	AdditionalProperties bool            `json:"additionalProperties"`
	Required             []string        `json:"required"`
	Properties           json.RawMessage `json:"properties"`
}

// kindRule says that a step using the kind has a `with:` of its schema.
func kindRule(name string, required bool) any {
	type ref struct {
		Ref string `json:"$ref"`
	}
	type then struct {
		Required   []string       `json:"required,omitempty"`
		Properties map[string]ref `json:"properties"`
	}
	type usesConst struct {
		Const string `json:"const"`
	}
	type cond struct {
		Required   []string             `json:"required"`
		Properties map[string]usesConst `json:"properties"`
	}
	t := then{Properties: map[string]ref{"with": {Ref: "#/definitions/" + name}}}
	if required {
		t.Required = []string{"with"}
	}
	return struct {
		If   cond `json:"if"`
		Then then `json:"then"`
	}{cond{[]string{"uses"}, map[string]usesConst{"uses": {name}}}, t}
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only values of this file's own types are marshalled
	}
	return b
}

// object is a JSON object with its members in the order written, so that
// the composed schema reads like the file it is made from.
type object []member

type member struct {
	key string
	val json.RawMessage
}

func parseObject(raw json.RawMessage) (object, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("not an object")
	}
	var o object
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		o = append(o, member{t.(string), v})
	}
	return o, nil
}

func (o object) get(key string) json.RawMessage {
	for _, m := range o {
		if m.key == key {
			return m.val
		}
	}
	return nil
}

// insertBefore adds the member key before the member next (at the end
// when there is none).
func (o *object) insertBefore(next, key string, val json.RawMessage) {
	for i := range *o {
		if (*o)[i].key == next {
			*o = slices.Insert(*o, i, member{key, val})
			return
		}
	}
	*o = append(*o, member{key, val})
}

// set replaces the member key, or appends it.
func (o *object) set(key string, val json.RawMessage) {
	for i := range *o {
		if (*o)[i].key == key {
			(*o)[i].val = val
			return
		}
	}
	*o = append(*o, member{key, val})
}

func (o object) marshal() json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(mustJSON(m.key))
		b.WriteByte(':')
		b.Write(m.val)
	}
	b.WriteByte('}')
	return b.Bytes()
}
