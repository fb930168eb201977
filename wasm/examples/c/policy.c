/* The strict acpflow policy (../README.md) in C.
 *
 * Command (default): the request on stdin, the kind in argv[1], the answer
 * on stdout; exit 1 on a malformed request.
 *   clang --target=wasm32-wasi -O2 -s -o policy.wasm policy.c json.c
 * Reactor (-DPOLICY_REACTOR): exports acpflow_alloc and acpflow_decide; the
 * kind is the request's "kind"; a malformed request traps.
 *   clang --target=wasm32-wasi -O2 -s -mexec-model=reactor -DPOLICY_REACTOR \
 *     -o policy-reactor.wasm policy.c json.c
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

/* Outcome of a decision: 0, or why the request is malformed. */
static const char *malformed;

static int is_type(const json_value *v, enum json_type t, const char *what) {
	if (!v) return 0;
	if (v->type != t) {
		malformed = what;
		return 0;
	}
	return 1;
}

static int eq(const json_value *s, const char *word) {
	return s && s->len == strlen(word) && memcmp(s->str, word, s->len) == 0;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* dangerous reports whether the simple command s[0..n) starts with the
 * word rm, sudo or curl. */
static int dangerous(const char *s, size_t n) {
	size_t i = 0, w;
	while (i < n && is_space(s[i])) i++;
	for (w = i; w < n && !is_space(s[w]); w++) {}
	size_t len = w - i;
	return (len == 2 && memcmp(s + i, "rm", 2) == 0) ||
	       (len == 4 && memcmp(s + i, "sudo", 4) == 0) ||
	       (len == 4 && memcmp(s + i, "curl", 4) == 0);
}

/* any_dangerous cuts the command line at &&, ||, ; and |, left to right. */
static int any_dangerous(const char *s, size_t n) {
	size_t start = 0;
	for (size_t i = 0; i < n; i++) {
		size_t cut = 0;
		if (i + 1 < n && ((s[i] == '&' && s[i + 1] == '&') || (s[i] == '|' && s[i + 1] == '|'))) cut = 2;
		else if (s[i] == ';' || s[i] == '|') cut = 1;
		if (!cut) continue;
		if (dangerous(s + start, i - start)) return 1;
		start = i + cut;
		i += cut - 1;
	}
	return dangerous(s + start, n - start);
}

static void verdict(json_buf *out, const char *decision, const char *reason) {
	json_buf_str(out, "{\"decision\":\"");
	json_buf_str(out, decision);
	json_buf_str(out, "\",\"reason\":\"");
	json_buf_str(out, reason);
	json_buf_str(out, "\"}\n");
}

static void permission(const json_value *req, json_buf *out) {
	const json_value *tool = json_get(req, "tool");
	if (tool && !is_type(tool, JSON_OBJECT, "tool is not an object")) return;
	const json_value *kind = json_get(tool, "kind");
	const json_value *command = json_get(tool, "command");
	const json_value *locations = json_get(tool, "locations");
	if (kind && !is_type(kind, JSON_STRING, "tool.kind is not a string")) return;
	if (command && !is_type(command, JSON_STRING, "tool.command is not a string")) return;
	if (locations && !is_type(locations, JSON_ARRAY, "tool.locations is not an array")) return;
	int inside = locations && locations->child;
	for (const json_value *l = locations ? locations->child : NULL; l; l = l->next) {
		if (l->type == JSON_NULL) { /* as Go decodes it: a location with no in_workspace */
			inside = 0;
			continue;
		}
		if (!is_type(l, JSON_OBJECT, "a location is not an object")) return;
		const json_value *in = json_get(l, "in_workspace");
		if (in && in->type != JSON_TRUE && in->type != JSON_FALSE) {
			malformed = "in_workspace is not a boolean";
			return;
		}
		inside = inside && in && in->type == JSON_TRUE;
	}
	if (eq(kind, "read") || eq(kind, "search") || eq(kind, "think"))
		verdict(out, "allow", "read-only tool");
	else if (eq(kind, "edit") && inside)
		verdict(out, "allow", "edit inside the workspace");
	else if (command && any_dangerous(command->str, command->len))
		verdict(out, "reject", "destructive or networked command");
	else
		verdict(out, "reject", "not allowed by the strict policy");
}

static void env(const json_value *req, json_buf *out) {
	const json_value *proposed = json_get(req, "proposed");
	if (proposed && !is_type(proposed, JSON_OBJECT, "proposed is not an object")) return;
	int home = 0;
	for (const json_value *v = proposed ? proposed->child : NULL; v; v = v->next) {
		if (!is_type(v, JSON_STRING, "a proposed value is not a string")) return;
		if (v->keylen == 4 && memcmp(v->key, "HOME", 4) == 0) home = 1;
	}
	if (!home) {
		json_buf_str(out, "{\"deny\":\"no HOME\"}\n");
		return;
	}
	json_buf_str(out, "{\"env\":{");
	int first = 1;
	for (const json_value *v = proposed->child; v; v = v->next) {
		if (v->keylen >= 4 && memcmp(v->key, "AWS_", 4) == 0) continue;
		if (!first) json_buf_str(out, ",");
		first = 0;
		json_buf_quote(out, v->key, v->keylen);
		json_buf_str(out, ":");
		json_buf_quote(out, v->str, v->len);
	}
	json_buf_str(out, "}}\n");
}

/* decide answers the request in[0..n) for kind (NULL: the request's own
 * "kind") into out, or sets malformed. */
static void decide(const char *kind, const char *in, size_t n, json_buf *out) {
	malformed = NULL;
	json_value *req = json_parse(in, n);
	if (!req || req->type != JSON_OBJECT) {
		malformed = "not a JSON object";
	} else {
		if (!kind) {
			const json_value *k = json_get(req, "kind");
			if (is_type(k, JSON_STRING, "kind is not a string")) kind = k->str;
		}
		if (malformed) {
		} else if (kind && strcmp(kind, "permission") == 0) {
			permission(req, out);
		} else if (kind && strcmp(kind, "env") == 0) {
			env(req, out);
		} else {
			malformed = "unknown kind";
		}
	}
	json_free(req);
}

#ifdef POLICY_REACTOR

static json_buf answer;

__attribute__((export_name("acpflow_alloc"))) void *acpflow_alloc(int32_t len) {
	return malloc(len > 0 ? (size_t)len : 1);
}

__attribute__((export_name("acpflow_decide"))) int64_t acpflow_decide(char *req, int32_t len) {
	answer.len = 0;
	decide(NULL, req, (size_t)len, &answer);
	free(req);
	if (malformed) __builtin_trap();
	return (int64_t)(((uint64_t)(uintptr_t)answer.data << 32) | (uint32_t)answer.len);
}

#else

int main(int argc, char **argv) {
	json_buf in = {0}, out = {0};
	char chunk[4096];
	size_t n;
	while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0) json_buf_bytes(&in, chunk, n);
	if (ferror(stdin)) {
		fputs("policy: cannot read stdin\n", stderr);
		return 1;
	}
	if (argc < 2) {
		fputs("usage: policy permission|env\n", stderr);
		return 1;
	}
	decide(argv[1], in.data ? in.data : "", in.len, &out);
	if (malformed) {
		fprintf(stderr, "policy: malformed request: %s\n", malformed);
		return 1;
	}
	fwrite(out.data, 1, out.len, stdout);
	return 0;
}

#endif
