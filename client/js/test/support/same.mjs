// sameValues requires two JSON-like values to be the same, which
// assert.deepStrictEqual alone does not check: object keys in the same
// order, and -0 apart from 0.

import assert from "node:assert/strict";

export function sameValues(got, want, path = "$") {
  if (typeof want === "number") {
    assert.ok(Object.is(got, want), `${path}: ${String(got)} (${Object.is(got, -0) ? "-0" : typeof got}), want ${Object.is(want, -0) ? "-0" : String(want)}`);
    return;
  }
  if (want === null || typeof want !== "object") {
    assert.strictEqual(got, want, path);
    return;
  }
  assert.ok(got !== null && typeof got === "object" && Array.isArray(got) === Array.isArray(want), `${path}: ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  if (want instanceof Date) {
    assert.ok(got instanceof Date && got.getTime() === want.getTime(), path);
    return;
  }
  assert.deepStrictEqual(Object.keys(got), Object.keys(want), `${path}: keys`);
  for (const k of Object.keys(want)) sameValues(got[k], want[k], `${path}.${k}`);
}
