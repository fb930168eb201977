#include "json.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
	const char *p, *end;
	int depth;
} parser;

static json_value *parse_value(parser *ps);

static void *xcalloc(size_t n) {
	void *p = calloc(1, n);
	if (!p) abort();
	return p;
}

static void skip_ws(parser *ps) {
	while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

static int literal(parser *ps, const char *word) {
	size_t n = strlen(word);
	if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0) return 0;
	ps->p += n;
	return 1;
}

static int hex4(parser *ps, unsigned *out) {
	unsigned v = 0;
	if (ps->end - ps->p < 4) return 0;
	for (int i = 0; i < 4; i++) {
		char c = *ps->p++;
		v <<= 4;
		if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
		else return 0;
	}
	*out = v;
	return 1;
}

static size_t put_utf8(char *out, unsigned cp) {
	if (cp < 0x80) { out[0] = (char)cp; return 1; }
	if (cp < 0x800) {
		out[0] = (char)(0xC0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xE0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		out[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	out[0] = (char)(0xF0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
	out[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

/* parse_string reads a string at ps->p (which is '"') into a malloc'd,
 * NUL-terminated buffer. Decoding never makes a string longer than its
 * escaped form, so the buffer is sized from the source. */
static int parse_string(parser *ps, char **out, size_t *outlen) {
	const char *start = ++ps->p;
	const char *q = start;
	while (q < ps->end && *q != '"') {
		if (*q == '\\') q++;
		q++;
	}
	if (q >= ps->end) return 0;
	char *buf = malloc((size_t)(q - start) + 1);
	if (!buf) abort();
	size_t n = 0;
	while (ps->p < ps->end && *ps->p != '"') {
		unsigned char c = (unsigned char)*ps->p++;
		if (c < 0x20) goto bad;
		if (c != '\\') { buf[n++] = (char)c; continue; }
		if (ps->p >= ps->end) goto bad;
		switch (*ps->p++) {
		case '"': buf[n++] = '"'; break;
		case '\\': buf[n++] = '\\'; break;
		case '/': buf[n++] = '/'; break;
		case 'b': buf[n++] = '\b'; break;
		case 'f': buf[n++] = '\f'; break;
		case 'n': buf[n++] = '\n'; break;
		case 'r': buf[n++] = '\r'; break;
		case 't': buf[n++] = '\t'; break;
		case 'u': {
			unsigned cp, lo;
			if (!hex4(ps, &cp)) goto bad;
			if (cp >= 0xD800 && cp < 0xDC00) {
				/* a high surrogate: pair it, or replace it as Go does */
				const char *save = ps->p;
				if (ps->end - ps->p >= 6 && ps->p[0] == '\\' && ps->p[1] == 'u') {
					ps->p += 2;
					if (hex4(ps, &lo) && lo >= 0xDC00 && lo < 0xE000) {
						cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
					} else {
						ps->p = save;
						cp = 0xFFFD;
					}
				} else {
					cp = 0xFFFD;
				}
			} else if (cp >= 0xDC00 && cp < 0xE000) {
				cp = 0xFFFD;
			}
			n += put_utf8(buf + n, cp);
			break;
		}
		default:
			goto bad;
		}
	}
	if (ps->p >= ps->end) goto bad;
	ps->p++; /* closing quote */
	buf[n] = 0;
	*out = buf;
	*outlen = n;
	return 1;
bad:
	free(buf);
	return 0;
}

static int digits(parser *ps) {
	const char *s = ps->p;
	while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') ps->p++;
	return ps->p > s;
}

static int parse_number(parser *ps) {
	if (ps->p < ps->end && *ps->p == '-') ps->p++;
	if (ps->p < ps->end && *ps->p == '0') ps->p++;
	else if (!digits(ps)) return 0;
	if (ps->p < ps->end && *ps->p == '.') {
		ps->p++;
		if (!digits(ps)) return 0;
	}
	if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
		ps->p++;
		if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-')) ps->p++;
		if (!digits(ps)) return 0;
	}
	return 1;
}

/* parse_items reads the elements of an array or the members of an object,
 * ps->p just past the opening bracket. */
static int parse_items(parser *ps, json_value *v, char close, int members) {
	json_value **tail = &v->child;
	skip_ws(ps);
	if (ps->p < ps->end && *ps->p == close) { ps->p++; return 1; }
	for (;;) {
		char *key = NULL;
		size_t keylen = 0;
		if (members) {
			skip_ws(ps);
			if (ps->p >= ps->end || *ps->p != '"' || !parse_string(ps, &key, &keylen)) return 0;
			skip_ws(ps);
			if (ps->p >= ps->end || *ps->p != ':') { free(key); return 0; }
			ps->p++;
		}
		json_value *item = parse_value(ps);
		if (!item) { free(key); return 0; }
		item->key = key;
		item->keylen = keylen;
		*tail = item;
		tail = &item->next;
		skip_ws(ps);
		if (ps->p >= ps->end) return 0;
		if (*ps->p == ',') { ps->p++; continue; }
		if (*ps->p == close) { ps->p++; return 1; }
		return 0;
	}
}

static json_value *parse_value(parser *ps) {
	skip_ws(ps);
	if (ps->p >= ps->end || ++ps->depth > 512) return NULL;
	json_value *v = xcalloc(sizeof *v);
	const char *start = ps->p;
	int ok;
	switch (*ps->p) {
	case '{': ps->p++; v->type = JSON_OBJECT; ok = parse_items(ps, v, '}', 1); break;
	case '[': ps->p++; v->type = JSON_ARRAY; ok = parse_items(ps, v, ']', 0); break;
	case '"': v->type = JSON_STRING; ok = parse_string(ps, &v->str, &v->len); break;
	case 't': v->type = JSON_TRUE; ok = literal(ps, "true"); break;
	case 'f': v->type = JSON_FALSE; ok = literal(ps, "false"); break;
	case 'n': v->type = JSON_NULL; ok = literal(ps, "null"); break;
	default:
		v->type = JSON_NUMBER;
		ok = parse_number(ps);
		if (ok) {
			v->len = (size_t)(ps->p - start);
			v->str = malloc(v->len + 1);
			if (!v->str) abort();
			memcpy(v->str, start, v->len);
			v->str[v->len] = 0;
		}
	}
	ps->depth--;
	if (!ok) { json_free(v); return NULL; }
	return v;
}

json_value *json_parse(const char *s, size_t n) {
	parser ps = {s, s + n, 0};
	json_value *v = parse_value(&ps);
	if (!v) return NULL;
	skip_ws(&ps);
	if (ps.p != ps.end) { json_free(v); return NULL; }
	return v;
}

void json_free(json_value *v) {
	while (v) {
		json_value *next = v->next;
		json_free(v->child);
		free(v->str);
		free(v->key);
		free(v);
		v = next;
	}
}

const json_value *json_get(const json_value *obj, const char *key) {
	if (!obj || obj->type != JSON_OBJECT) return NULL;
	size_t n = strlen(key);
	for (const json_value *m = obj->child; m; m = m->next)
		if (m->keylen == n && memcmp(m->key, key, n) == 0)
			return m->type == JSON_NULL ? NULL : m;
	return NULL;
}

void json_buf_bytes(json_buf *b, const char *s, size_t n) {
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n) cap *= 2;
		b->data = realloc(b->data, cap);
		if (!b->data) abort();
		b->cap = cap;
	}
	memcpy(b->data + b->len, s, n);
	b->len += n;
}

void json_buf_str(json_buf *b, const char *s) { json_buf_bytes(b, s, strlen(s)); }

void json_buf_quote(json_buf *b, const char *s, size_t n) {
	static const char hex[] = "0123456789abcdef";
	json_buf_bytes(b, "\"", 1);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\') {
			char esc[2] = {'\\', (char)c};
			json_buf_bytes(b, esc, 2);
		} else if (c < 0x20) {
			char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
			json_buf_bytes(b, esc, 6);
		} else {
			json_buf_bytes(b, (const char *)&c, 1);
		}
	}
	json_buf_bytes(b, "\"", 1);
}
