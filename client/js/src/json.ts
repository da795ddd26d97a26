// JSON and quoted text exactly as the Go client's inspect_state writes them.
//
// The tool's answers are held byte for byte to the Go tool's
// (client/testdata/cases.json), and Go's encoding/json differs from
// JSON.stringify in three ways that show: object keys are sorted (by code
// point, as Go compares UTF-8 bytes; a JavaScript object would put
// integer-like keys first), U+2028 and U+2029 are escaped, and -0 is written
// "-0". Numbers are otherwise the same: both write the shortest digits that
// read back as the same double, in exponent form below 1e-6 and from 1e21.
//
// A value to write is plain JSON data or a Map. A Map is written in its
// insertion order: it stands for a Go struct (an answer's fields, in Go's
// order) or for a map already sorted by prepare (inspect.ts). A plain
// object's keys are sorted when it is written.

/** compareCodePoints orders strings by code point, as Go orders them by UTF-8 bytes. */
export function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    // Only a surrogate against a code unit from U+E000 up compares
    // differently by code point than by UTF-16 unit: the surrogate stands
    // for a code point past U+FFFF.
    const xs = x >= 0xd800 && x <= 0xdfff;
    const ys = y >= 0xd800 && y <= 0xdfff;
    if (xs !== ys) return xs ? 1 : -1;
    return x - y;
  }
  return a.length - b.length;
}

/** sortedKeys returns an object's keys in code point order. */
export function sortedKeys(o: object): string[] {
  return Object.keys(o).sort(compareCodePoints);
}

/** chars counts code points: the model-facing size of a text. */
export function chars(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
    n++;
  }
  return n;
}

/** dumps writes v as compact JSON, as Go's encoding/json does with HTML escaping off. */
export function dumps(v: unknown): string {
  const out: string[] = [];
  encode(v, out);
  return out.join("");
}

function encode(v: unknown, out: string[]): void {
  if (v === null || v === undefined) {
    out.push("null");
  } else if (typeof v === "boolean") {
    out.push(v ? "true" : "false");
  } else if (typeof v === "number") {
    out.push(number(v));
  } else if (typeof v === "bigint") {
    out.push(v.toString());
  } else if (typeof v === "string") {
    out.push(jsonString(v));
  } else if (Array.isArray(v)) {
    out.push("[");
    v.forEach((x, i) => {
      if (i) out.push(",");
      encode(x, out);
    });
    out.push("]");
  } else if (v instanceof Map) {
    out.push("{");
    let i = 0;
    for (const [k, x] of v) {
      if (i++) out.push(",");
      out.push(jsonString(String(k)), ":");
      encode(x, out);
    }
    out.push("}");
  } else if (typeof v === "object") {
    const o = v as Record<string, unknown>;
    out.push("{");
    sortedKeys(o).forEach((k, i) => {
      if (i) out.push(",");
      out.push(jsonString(k), ":");
      encode(o[k], out);
    });
    out.push("}");
  } else {
    out.push(jsonString(String(v)));
  }
}

function number(n: number): string {
  if (!Number.isFinite(n)) return jsonString(String(n)); // prepare spells these; never reached from the wire
  if (Object.is(n, -0)) return "-0";
  return String(n);
}

/** jsonString quotes s as Go's encoding/json does. */
export function jsonString(s: string): string {
  return JSON.stringify(s).replace(/[\u2028\u2029]/g, (c) => (c === "\u2028" ? "\\u2028" : "\\u2029"));
}

const printable = /^[\p{L}\p{M}\p{N}\p{P}\p{S} ]$/u;
const shortEscapes: Record<string, string> = {
  "\x07": "\\a",
  "\b": "\\b",
  "\f": "\\f",
  "\n": "\\n",
  "\r": "\\r",
  "\t": "\\t",
  "\v": "\\v",
};

/** goQuote quotes s as Go's %q (strconv.Quote) does. */
export function goQuote(s: string): string {
  let out = '"';
  for (const c of s) {
    const cp = c.codePointAt(0)!;
    if (c === '"') out += '\\"';
    else if (c === "\\") out += "\\\\";
    else if (c in shortEscapes) out += shortEscapes[c];
    else if (cp >= 0xd800 && cp <= 0xdfff) out += "\\ufffd";
    else if (printable.test(c)) out += c;
    else if (cp < 0x80) out += "\\x" + cp.toString(16).padStart(2, "0");
    else if (cp <= 0xffff) out += "\\u" + cp.toString(16).padStart(4, "0");
    else out += "\\U" + cp.toString(16).padStart(8, "0");
  }
  return out + '"';
}
