package steps

// StructuredStep is a prepared step whose result carries a value of a
// declared shape: acp-subagent's `output-schema:`, whose final message must
// be JSON matching the schema. Expressions read the value as
// `steps.ID.json`, and `validate` types it by JSONShape.
type StructuredStep interface {
	Step
	// JSONShape is what the step's value holds, as far as its schema says;
	// nil when the step declares no schema (its json is then the output
	// parsed as JSON, of no known type).
	JSONShape() *Shape
}

// Shape is the type of a JSON value as a schema declares it, for type
// checks: what is certain of every value the schema accepts, and nothing
// more.
//
// # Notes
//
// Type "" is any value: the schema allows several types, or says nothing
// a type check can use (a $ref cycle, anyOf, a type list). Numbers are one
// type, "number", integers included: a value decoded from JSON is a
// float64 either way.
type Shape struct {
	// Type is "string", "number", "boolean", "object" or "array"; "" for
	// any value.
	Type string
	// Properties are an object's declared properties.
	Properties map[string]*Shape
	// Closed says that an object has no properties but Properties
	// (additionalProperties: false, and no patternProperties).
	Closed bool
	// Others is the shape of an object's other properties, when the schema
	// gives them one (additionalProperties: SCHEMA); nil: any value.
	Others *Shape
	// Items is the shape of an array's elements; nil: any value.
	Items *Shape
}
