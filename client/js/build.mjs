#!/usr/bin/env node
// build.mjs: builds dist/ — ESM (dist/*.js), CommonJS (dist/cjs/*.js, with a
// package.json saying so) and the types of each — with the TypeScript
// compiler in devDependencies. `npm run build` runs it, and so does
// `prepare`, which npm runs when the package is installed from git, from a
// folder, or with `npm ci` here.
//
// From git, npm installs the devDependencies before `prepare`. From a
// folder (`npm install path/to/client/js`), npm links the folder and runs
// `prepare` without them, so when the compiler is missing it is installed
// first: `npm ci --include=dev --ignore-scripts`, the lock's exact versions,
// into this folder's node_modules.

import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const tsc = join(here, "node_modules", "typescript", "bin", "tsc");
const run = (cmd, args) => execFileSync(cmd, args, { cwd: here, stdio: "inherit" });

if (!existsSync(tsc)) {
  process.stderr.write("@historyd/client: installing its build tools (npm ci --include=dev --ignore-scripts) to build dist/\n");
  // Run as npm runs itself, whatever npm the install was started with.
  const npm = process.env.npm_execpath;
  const args = ["ci", "--include=dev", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"];
  if (npm && npm.endsWith(".js")) run(process.execPath, [npm, ...args]);
  else run(process.platform === "win32" ? "npm.cmd" : "npm", args);
}
rmSync(join(here, "dist"), { recursive: true, force: true });
run(process.execPath, [tsc, "-p", "tsconfig.json"]);
run(process.execPath, [tsc, "-p", "tsconfig.cjs.json"]);
mkdirSync(join(here, "dist", "cjs"), { recursive: true });
writeFileSync(join(here, "dist", "cjs", "package.json"), '{ "type": "commonjs" }\n');
