// The strict acpflow policy (../README.md) in AssemblyScript: a WASI
// command (through @assemblyscript/wasi-shim) reading the request on stdin
// and the kind in argv[1].

import { Json, Kind, Parser, quote } from "./json";

function fail(msg: string): void {
  process.stderr.write("policy: " + msg + "\n");
  process.exit(1);
}

// malformed is set to why the request is malformed, or stays "".
let malformed = "";

function verdict(decision: string, reason: string): string {
  return "{\"decision\":\"" + decision + "\",\"reason\":\"" + reason + "\"}\n";
}

function isSpace(c: i32): bool {
  return c == 0x20 || c == 0x09 || c == 0x0a || c == 0x0d;
}

// dangerous reports whether the simple command s[from..to) starts with the
// word rm, sudo or curl.
function dangerous(s: string, from: i32, to: i32): bool {
  let i = from;
  while (i < to && isSpace(s.charCodeAt(i))) i++;
  let w = i;
  while (w < to && !isSpace(s.charCodeAt(w))) w++;
  const word = s.substring(i, w);
  return word == "rm" || word == "sudo" || word == "curl";
}

// anyDangerous cuts the command line at &&, ||, ; and |, left to right.
function anyDangerous(s: string): bool {
  let start = 0;
  let i = 0;
  while (i < s.length) {
    const c = s.charCodeAt(i);
    let cut = 0;
    if (i + 1 < s.length && ((c == 0x26 && s.charCodeAt(i + 1) == 0x26) || (c == 0x7c && s.charCodeAt(i + 1) == 0x7c))) cut = 2;
    else if (c == 0x3b || c == 0x7c) cut = 1;
    if (cut > 0) {
      if (dangerous(s, start, i)) return true;
      start = i + cut;
      i += cut;
    } else {
      i++;
    }
  }
  return dangerous(s, start, s.length);
}

function stringField(obj: Json | null, key: string): string {
  if (obj == null) return "";
  const v = obj.get(key);
  if (v == null) return "";
  if (v.kind != Kind.String) {
    malformed = key + " is not a string";
    return "";
  }
  return v.str;
}

function permission(req: Json): string {
  const tool = req.get("tool");
  if (tool != null && tool.kind != Kind.Object) {
    malformed = "tool is not an object";
    return "";
  }
  const kind = stringField(tool, "kind");
  const command = stringField(tool, "command");
  let inside = false;
  if (tool != null) {
    const locations = tool.get("locations");
    if (locations != null) {
      if (locations.kind != Kind.Array) {
        malformed = "tool.locations is not an array";
        return "";
      }
      inside = locations.items.length > 0;
      for (let k = 0; k < locations.items.length; k++) {
        const l = locations.items[k];
        if (l.kind == Kind.Null) {
          inside = false; // as Go decodes it: a location with no in_workspace
          continue;
        }
        if (l.kind != Kind.Object) {
          malformed = "a location is not an object";
          return "";
        }
        const w = l.get("in_workspace");
        if (w != null && w.kind != Kind.True && w.kind != Kind.False) {
          malformed = "in_workspace is not a boolean";
          return "";
        }
        if (w == null || w.kind != Kind.True) inside = false;
      }
    }
  }
  if (malformed != "") return "";
  if (kind == "read" || kind == "search" || kind == "think") return verdict("allow", "read-only tool");
  if (kind == "edit" && inside) return verdict("allow", "edit inside the workspace");
  if (anyDangerous(command)) return verdict("reject", "destructive or networked command");
  return verdict("reject", "not allowed by the strict policy");
}

function env(req: Json): string {
  const proposed = req.get("proposed");
  if (proposed == null) return "{\"deny\":\"no HOME\"}\n";
  if (proposed.kind != Kind.Object) {
    malformed = "proposed is not an object";
    return "";
  }
  let home = false;
  for (let k = 0; k < proposed.keys.length; k++) {
    if (proposed.items[k].kind != Kind.String) {
      malformed = "a proposed value is not a string";
      return "";
    }
    if (proposed.keys[k] == "HOME") home = true;
  }
  if (!home) return "{\"deny\":\"no HOME\"}\n";
  let out = "{\"env\":{";
  let first = true;
  for (let k = 0; k < proposed.keys.length; k++) {
    const name = proposed.keys[k];
    if (name.startsWith("AWS_")) continue;
    if (!first) out += ",";
    first = false;
    out += quote(name) + ":" + quote(proposed.items[k].str);
  }
  return out + "}}\n";
}

function readStdin(): Uint8Array {
  let data = new Uint8Array(4096);
  let n = 0;
  for (;;) {
    if (n == data.length) {
      const grown = new Uint8Array(data.length * 2);
      grown.set(data);
      data = grown;
    }
    const got = process.stdin.read(data.buffer, n);
    if (got <= 0) break;
    n += got;
  }
  return data.subarray(0, n);
}

function main(): void {
  const input = readStdin();
  const argv = process.argv;
  if (argv.length < 2) {
    fail("usage: policy permission|env");
    return;
  }
  const parser = new Parser(input);
  const req = parser.document();
  if (parser.failed || req.kind != Kind.Object) {
    fail("malformed request: not a JSON object");
    return;
  }
  let answer = "";
  if (argv[1] == "permission") answer = permission(req);
  else if (argv[1] == "env") answer = env(req);
  else malformed = "unknown kind " + argv[1];
  if (malformed != "") {
    fail("malformed request: " + malformed);
    return;
  }
  process.stdout.write(answer);
}

main();
