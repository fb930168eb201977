// A small JSON reader (RFC 8259, validating) and string writer. Strings are
// decoded from UTF-8 bytes; a failure sets Parser.failed instead of
// throwing, because an AssemblyScript throw aborts with exit code 255 and a
// malformed request must exit 1.

export const enum Kind { Null, False, True, Number, String, Array, Object }

export class Json {
  kind: Kind = Kind.Null;
  str: string = "";
  items: Json[] = [];   // array elements or object member values
  keys: string[] = [];  // object member names, parallel to items

  // get returns the member named key of an object, or null (also for a
  // member whose value is null).
  get(key: string): Json | null {
    if (this.kind != Kind.Object) return null;
    for (let i = 0; i < this.keys.length; i++) {
      if (this.keys[i] == key) {
        const v = this.items[i];
        return v.kind == Kind.Null ? null : v;
      }
    }
    return null;
  }
}

export class Parser {
  i: i32 = 0;
  depth: i32 = 0;
  failed: bool = false;

  constructor(public s: Uint8Array) {}

  fail(): Json {
    this.failed = true;
    return new Json();
  }

  peek(): i32 {
    return this.i < this.s.length ? <i32>this.s[this.i] : -1;
  }

  ws(): void {
    for (;;) {
      const c = this.peek();
      if (c != 0x20 && c != 0x09 && c != 0x0a && c != 0x0d) return;
      this.i++;
    }
  }

  document(): Json {
    const v = this.value();
    this.ws();
    if (this.i != this.s.length) this.failed = true;
    return v;
  }

  value(): Json {
    this.ws();
    if (this.failed || ++this.depth > 512) return this.fail();
    let v: Json;
    const c = this.peek();
    if (c == 0x7b) v = this.object();
    else if (c == 0x5b) v = this.array();
    else if (c == 0x22) {
      v = new Json();
      v.kind = Kind.String;
      v.str = this.string();
    } else if (c == 0x74) v = this.literal("true", Kind.True);
    else if (c == 0x66) v = this.literal("false", Kind.False);
    else if (c == 0x6e) v = this.literal("null", Kind.Null);
    else v = this.number();
    this.depth--;
    return v;
  }

  literal(word: string, kind: Kind): Json {
    for (let k = 0; k < word.length; k++) {
      if (this.peek() != word.charCodeAt(k)) return this.fail();
      this.i++;
    }
    const v = new Json();
    v.kind = kind;
    return v;
  }

  digits(): bool {
    const start = this.i;
    while (this.peek() >= 0x30 && this.peek() <= 0x39) this.i++;
    return this.i > start;
  }

  number(): Json {
    if (this.peek() == 0x2d) this.i++;
    if (this.peek() == 0x30) this.i++;
    else if (!this.digits()) return this.fail();
    if (this.peek() == 0x2e) {
      this.i++;
      if (!this.digits()) return this.fail();
    }
    if (this.peek() == 0x65 || this.peek() == 0x45) {
      this.i++;
      if (this.peek() == 0x2b || this.peek() == 0x2d) this.i++;
      if (!this.digits()) return this.fail();
    }
    const v = new Json();
    v.kind = Kind.Number;
    return v;
  }

  hex4(): i32 {
    let v = 0;
    for (let k = 0; k < 4; k++) {
      const c = this.peek();
      this.i++;
      v <<= 4;
      if (c >= 0x30 && c <= 0x39) v |= c - 0x30;
      else if (c >= 0x61 && c <= 0x66) v |= c - 0x61 + 10;
      else if (c >= 0x41 && c <= 0x46) v |= c - 0x41 + 10;
      else return -1;
    }
    return v;
  }

  // string reads a string at the opening quote, decoding escapes to UTF-8
  // bytes first so that raw UTF-8 and escapes mix correctly.
  string(): string {
    this.i++;
    // Size the buffer from this string alone (decoding never lengthens
    // it): the stub runtime never frees, so a buffer per string sized
    // from the rest of the input would make a large request quadratic.
    let end = this.i;
    while (end < this.s.length && this.s[end] != 0x22) end += this.s[end] == 0x5c ? 2 : 1;
    const out = new Uint8Array(end - this.i);
    let n = 0;
    for (;;) {
      const c = this.peek();
      if (c < 0) { this.failed = true; return ""; }
      this.i++;
      if (c == 0x22) break;
      if (c < 0x20) { this.failed = true; return ""; }
      if (c != 0x5c) { out[n++] = <u8>c; continue; }
      const e = this.peek();
      this.i++;
      if (e == 0x22 || e == 0x5c || e == 0x2f) out[n++] = <u8>e;
      else if (e == 0x62) out[n++] = 8;
      else if (e == 0x66) out[n++] = 12;
      else if (e == 0x6e) out[n++] = 10;
      else if (e == 0x72) out[n++] = 13;
      else if (e == 0x74) out[n++] = 9;
      else if (e == 0x75) {
        let cp = this.hex4();
        if (cp < 0) { this.failed = true; return ""; }
        if (cp >= 0xd800 && cp < 0xdc00) {
          // pair a high surrogate, or replace it as Go does
          const save = this.i;
          let paired = false;
          if (this.peek() == 0x5c && this.i + 1 < this.s.length && this.s[this.i + 1] == 0x75) {
            this.i += 2;
            const lo = this.hex4();
            if (lo >= 0xdc00 && lo < 0xe000) {
              cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
              paired = true;
            }
          }
          if (!paired) {
            this.i = save;
            cp = 0xfffd;
          }
        } else if (cp >= 0xdc00 && cp < 0xe000) {
          cp = 0xfffd;
        }
        n = putUTF8(out, n, cp);
      } else { this.failed = true; return ""; }
    }
    return String.UTF8.decodeUnsafe(out.dataStart, n);
  }

  array(): Json {
    this.i++;
    const v = new Json();
    v.kind = Kind.Array;
    this.ws();
    if (this.peek() == 0x5d) { this.i++; return v; }
    for (;;) {
      v.items.push(this.value());
      if (this.failed) return v;
      this.ws();
      const c = this.peek();
      this.i++;
      if (c == 0x2c) continue;
      if (c == 0x5d) return v;
      return this.fail();
    }
  }

  object(): Json {
    this.i++;
    const v = new Json();
    v.kind = Kind.Object;
    this.ws();
    if (this.peek() == 0x7d) { this.i++; return v; }
    for (;;) {
      this.ws();
      if (this.peek() != 0x22) return this.fail();
      const key = this.string();
      this.ws();
      if (this.failed || this.peek() != 0x3a) return this.fail();
      this.i++;
      v.keys.push(key);
      v.items.push(this.value());
      if (this.failed) return v;
      this.ws();
      const c = this.peek();
      this.i++;
      if (c == 0x2c) continue;
      if (c == 0x7d) return v;
      return this.fail();
    }
  }
}

function putUTF8(out: Uint8Array, n: i32, cp: i32): i32 {
  if (cp < 0x80) {
    out[n++] = <u8>cp;
  } else if (cp < 0x800) {
    out[n++] = <u8>(0xc0 | (cp >> 6));
    out[n++] = <u8>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out[n++] = <u8>(0xe0 | (cp >> 12));
    out[n++] = <u8>(0x80 | ((cp >> 6) & 0x3f));
    out[n++] = <u8>(0x80 | (cp & 0x3f));
  } else {
    out[n++] = <u8>(0xf0 | (cp >> 18));
    out[n++] = <u8>(0x80 | ((cp >> 12) & 0x3f));
    out[n++] = <u8>(0x80 | ((cp >> 6) & 0x3f));
    out[n++] = <u8>(0x80 | (cp & 0x3f));
  }
  return n;
}

// quote writes s as a JSON string.
export function quote(s: string): string {
  let out = "\"";
  for (let k = 0; k < s.length; k++) {
    const c = s.charCodeAt(k);
    if (c == 0x22) out += "\\\"";
    else if (c == 0x5c) out += "\\\\";
    else if (c < 0x20) out += "\\u00" + (c < 0x10 ? "0" : "") + c.toString(16);
    else out += String.fromCharCode(c);
  }
  return out + "\"";
}
