#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
// `taplo fmt --check` leaves the shipped TOML files as they are (docs/schemas.md, "Formatting
// with taplo fmt"): catalogs, profiles and example graphs, formatted by the options of ROOT's
// .taplo.toml. Their bytes are hashed into every report, so a formatter run must not change them.
//
//   node taplo_fmt.mjs ROOT
//
// A control checks that the same command does flag a misformatted file, so a pass is not vacuous.
// Exit status: 0 pass, 1 a check failed, 2 usage or set-up error, 77 skipped (Taplo's command line,
// npm @taplo/cli, is not installed; CTest reports it as skipped with that reason).
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";

const SKIP = 77;
const [rootArg, ...extra] = process.argv.slice(2);
if (!rootArg || extra.length !== 0) {
  console.error("usage: taplo_fmt.mjs ROOT");
  process.exit(2);
}
const ROOT = path.resolve(rootArg);

let taploCli;
try {
  taploCli = createRequire(import.meta.url).resolve("@taplo/cli/dist/cli.js");
} catch (error) {
  console.log(`SKIP: Taplo's command line (npm @taplo/cli) is not installed (${error.code ?? error.message}); ` +
              "run `npm ci --prefix tools/schema-check` (tools/setup.sh does it)");
  process.exit(SKIP);
}

function tomlFiles(dir) {
  return fs.readdirSync(path.join(ROOT, dir)).filter((name) => name.endsWith(".toml")).sort()
    .map((name) => path.join(dir, name));
}

/// Runs `taplo fmt --check FILES` in ROOT (so it reads ROOT/.taplo.toml): { status, output }.
function fmtCheck(files) {
  const run = spawnSync(process.execPath, [taploCli, "--colors", "never", "fmt", "--check", ...files],
                        { cwd: ROOT, encoding: "utf8", timeout: 120000 });
  return { status: run.status, output: `${run.stdout ?? ""}${run.stderr ?? ""}${run.error ? String(run.error) : ""}` };
}

const files = [...tomlFiles("catalogs"), ...tomlFiles("profiles"), ...tomlFiles(path.join("examples", "graphs"))];
let failures = 0;

const shipped = fmtCheck(files);
if (files.length === 0 || shipped.status !== 0) {
  failures++;
  console.log(`FAIL taplo fmt --check would reformat shipped files (exit ${shipped.status}):`);
  for (const line of shipped.output.split("\n")) {
    if (/not properly formatted|error/i.test(line)) console.log(`  ${JSON.stringify(line.trim())}`);
  }
} else {
  console.log(`ok   taplo fmt --check leaves ${files.length} shipped files unchanged`);
}

// Control: an entry with extra spaces around `=` is reformatted.
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "capsule-taplo-fmt-"));
try {
  const misformatted = path.join(scratch, "misformatted.toml");
  fs.writeFileSync(misformatted, 'schema = 1\nmodule  =  "m"\n[defaults]\nop = "relu"\n');
  const control = fmtCheck([misformatted]);
  if (control.status === 0) {
    failures++;
    console.log("FAIL control: taplo fmt --check accepted a misformatted file");
  } else {
    console.log("ok   control: taplo fmt --check flags a misformatted file");
  }
} finally {
  fs.rmSync(scratch, { recursive: true, force: true });
}

process.exit(failures === 0 ? 0 : 1);
