// The package as a consumer loads it: by its name, through the exports map,
// with import (ESM, dist/) and with require (CommonJS, dist/cjs/), each
// entry point giving the same names, and each with its types. Installing
// from a folder and from git is test/clients' TestJSInstall.

import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";

const require = createRequire(import.meta.url);
const root = fileURLToPath(new URL("../../", import.meta.url));
const pkg = JSON.parse(readFileSync(`${root}package.json`, "utf8"));

describe("the package", () => {
  for (const [entry, name] of [[".", "@historyd/client"], ["./langchain", "@historyd/client/langchain"], ["./inspect", "@historyd/client/inspect"]]) {
    test(`${name}: import and require give the same names, with types`, async () => {
      const esm = await import(name);
      const cjs = require(name);
      assert.deepEqual(Object.keys(cjs).filter((k) => k !== "__esModule").sort(), Object.keys(esm).sort());
      assert.ok(Object.keys(esm).length > 0);
      const exported = pkg.exports[entry];
      for (const condition of ["import", "require"]) {
        for (const file of [exported[condition].types, exported[condition].default]) {
          assert.ok(existsSync(`${root}${file}`), `${entry} ${condition}: ${file} is missing`);
        }
      }
      assert.match(require.resolve(name), /\/dist\/cjs\/[a-z]+\.js$/);
    });
  }

  test("the CommonJS build is CommonJS, and the classes work from it", () => {
    assert.deepEqual(JSON.parse(readFileSync(`${root}dist/cjs/package.json`, "utf8")), { type: "commonjs" });
    const { ThreadHistory, HistorydError, Code } = require("@historyd/client");
    const history = new ThreadHistory("127.0.0.1:1", { plaintext: true });
    assert.equal(typeof history.snapshot, "function");
    assert.equal(new HistorydError("Snapshot", "t", Code.Unavailable, "x").codeName, "UNAVAILABLE");
    history.close();
  });

  test("prepare builds dist/, so a folder or git install is built", () => {
    assert.match(pkg.scripts.prepare, /\bbuild\b/);
    assert.deepEqual(pkg.files, ["dist", "src"]);
  });
});
