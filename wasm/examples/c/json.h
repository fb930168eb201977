/* A small JSON reader and string writer, enough for acpflow policy requests.
 * json_parse validates the whole document (RFC 8259) and returns a tree;
 * strings are decoded to UTF-8. */
#ifndef POLICY_JSON_H
#define POLICY_JSON_H

#include <stddef.h>

enum json_type { JSON_NULL, JSON_FALSE, JSON_TRUE, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT };

typedef struct json_value {
	enum json_type type;
	char *str; /* JSON_STRING: decoded bytes; JSON_NUMBER: the literal */
	size_t len;
	char *key; /* set when the value is an object member: decoded name */
	size_t keylen;
	struct json_value *child; /* first element or member */
	struct json_value *next;  /* next sibling */
} json_value;

/* json_parse returns the document in s[0..n), or NULL if it is not exactly
 * one JSON value (surrounding white space allowed) or nests deeper than 512. */
json_value *json_parse(const char *s, size_t n);
void json_free(json_value *v);

/* json_get returns the member named key of obj, or NULL (also when obj is
 * not an object). A member whose value is null counts as missing. */
const json_value *json_get(const json_value *obj, const char *key);

/* A growable output buffer. */
typedef struct {
	char *data;
	size_t len, cap;
} json_buf;

void json_buf_bytes(json_buf *b, const char *s, size_t n);
void json_buf_str(json_buf *b, const char *s); /* raw, NUL-terminated */
void json_buf_quote(json_buf *b, const char *s, size_t n); /* as a JSON string */

#endif
