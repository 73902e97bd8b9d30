#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
// Checks capsule's file formats with a real JSON Schema validator (Ajv), see docs/schemas.md.
//
//   node validate.mjs shipped ROOT               every shipped catalog, profile, graph and waivers
//                                                file validates against tools/schemas; the schemas'
//                                                enums equal the engine's name tables
//   node validate.mjs gallery DIR CAPSULE_BIN    every entry of the invalid gallery DIR is rejected
//                                                by the schema or by the loader (CAPSULE_BIN)
//   node validate.mjs sarif FILE [--expect-results]
//                                                FILE is valid against the SARIF 2.1.0 schema kept in
//                                                tests/schemas/third_party (its SHA-256 is checked)
//   node validate.mjs run FILE [--expect-rechecks]
//                                                FILE (`capsule run --format json`) is valid against
//                                                tools/schemas/run.schema.json; with the flag, some
//                                                capsule used shows value and vjp rechecks
//   node validate.mjs selftest                   the schemas accept and reject small inline cases
//   node validate.mjs sarif-logs OUT DIR CAPSULE_BIN
//                                                writes lint's SARIF logs of the shipped tree and of
//                                                each lint entry of the invalid gallery DIR to OUT
//
// Every mode also runs controls (mutated documents must be rejected; for the gallery, valid files
// must pass the same loader harness), so a pass is never vacuous. Exit status: 0 pass, 1 a check
// failed, 2 usage or set-up error.
import { spawnSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, "..", "..");
const SCHEMA_DIR = path.join(REPO, "tools", "schemas");
const KINDS = ["catalog", "profile", "graph", "waiver"];

async function importOrExplain(name) {
  try {
    return await import(name);
  } catch (error) {
    console.error(`schema-check: cannot load \`${name}\` (${error.code ?? error.message}).`);
    console.error("schema-check: run `npm ci --prefix tools/schema-check` (tools/setup.sh does it).");
    process.exit(2);
  }
}

const { default: Ajv } = await importOrExplain("ajv");
const { default: AjvDraft04 } = await importOrExplain("ajv-draft-04");
const { default: addFormats } = await importOrExplain("ajv-formats");
const toml = await importOrExplain("smol-toml");

// ---- TOML → JSON ------------------------------------------------------------------------------

/// Converts a parsed TOML document to the JSON an editor's schema check sees: local dates become
/// "YYYY-MM-DD" strings (other date/time values their ISO text, which `format: date` rejects),
/// integers become numbers. A float with an integral value (`1.0`) becomes `{ "toml-float": 1 }`,
/// because JSON cannot tell 1.0 from 1 and the loaders want integers where the schemas say so.
function toJson(value) {
  if (typeof value === "bigint") return Number(value);
  if (typeof value === "number") return Number.isInteger(value) ? { "toml-float": value } : value;
  if (value instanceof toml.TomlDate) return value.toISOString();
  if (Array.isArray(value)) return value.map(toJson);
  if (value !== null && typeof value === "object") {
    const out = {};
    for (const [key, item] of Object.entries(value)) out[key] = toJson(item);
    return out;
  }
  return value;
}

/// { data } or { parseError } for a TOML file.
function readToml(file) {
  const text = fs.readFileSync(file, "utf8");
  try {
    return { data: toJson(toml.parse(text, { integersAsBigInt: true })) };
  } catch (error) {
    return { parseError: String(error.message).split("\n")[0] };
  }
}

// ---- schemas ----------------------------------------------------------------------------------

function loadSchemas() {
  const ajv = new Ajv({ allErrors: true, verbose: true, strict: true, strictTypes: false, strictRequired: false });
  addFormats(ajv);
  ajv.addKeyword("x-taplo");
  const schemas = {};
  const validators = {};
  for (const kind of KINDS) {
    const file = path.join(SCHEMA_DIR, `${kind}.schema.json`);
    schemas[kind] = JSON.parse(fs.readFileSync(file, "utf8"));
    validators[kind] = ajv.compile(schemas[kind]);
  }
  return { schemas, validators };
}

/// One short line per error: `/capsule/0: must NOT have additional properties (provder)`.
/// Errors inside one branch of a oneOf come after the oneOf's own error, and an unknown key
/// (the likeliest typo) comes first.
function describeErrors(errors, limit = 3) {
  const rank = (e) => (e.schemaPath.includes("/oneOf/") ? 2 : 0) + (e.keyword === "additionalProperties" ? 0 : 1);
  const lines = [];
  for (const e of [...(errors ?? [])].sort((a, b) => rank(a) - rank(b))) {
    if (e.keyword === "if") continue;  // always followed by the failing `then`/`else` error
    if (e.schemaPath.includes("/contains/")) continue;  // per-item misses behind one `contains` error
    let detail = e.message;
    if (e.keyword === "additionalProperties") detail += ` (${e.params.additionalProperty})`;
    if (e.keyword === "enum") detail += ` (got ${JSON.stringify(e.data)})`;
    if (e.keyword === "const") detail = `must be ${JSON.stringify(e.params.allowedValue)}, got ${JSON.stringify(e.data)}`;
    if (e.keyword === "required") detail = `missing \`${e.params.missingProperty}\``;
    if (e.keyword === "false schema") detail = "key not allowed here";
    lines.push(`${e.instancePath || "/"}: ${detail}`);
  }
  const unique = [...new Set(lines)];
  return unique.length <= limit ? unique : [...unique.slice(0, limit), `... ${unique.length - limit} more`];
}

/// Which schema a file is checked against, by name (the convention .taplo.toml uses too).
function kindOf(file, fallback) {
  const base = path.basename(file);
  if (base.endsWith(".graph.toml")) return "graph";
  if (base.endsWith(".waivers.toml") || base === "waivers.toml") return "waiver";
  if (base.endsWith(".profile.toml")) return "profile";
  return fallback;
}

/// { ok, why } for one file.
function checkFile(validators, kind, file) {
  const { data, parseError } = readToml(file);
  if (parseError !== undefined) return { ok: false, why: [`TOML: ${parseError}`] };
  const ok = validators[kind](data);
  return { ok, why: ok ? [] : describeErrors(validators[kind].errors), data };
}

function listToml(dir, predicate = () => true) {
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir).filter((n) => n.endsWith(".toml") && predicate(n)).sort().map((n) => path.join(dir, n));
}

/// Every `*.waivers.toml` / `waivers.toml` under root, skipping build trees, dependencies and the
/// invalid gallery.
function findWaiverFiles(root) {
  const out = [];
  const skip = new Set([".git", "node_modules", "invalid"]);
  const walk = (dir) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      if (entry.isDirectory()) {
        if (!skip.has(entry.name) && !entry.name.startsWith("build")) walk(path.join(dir, entry.name));
      } else if (kindOf(entry.name, "") === "waiver") {
        out.push(path.join(dir, entry.name));
      }
    }
  };
  walk(root);
  return out.sort();
}

// ---- schema hygiene: titles, descriptions and the engine's vocabulary ---------------------------

/// Every property must carry a title and a description, directly or through its $ref, because
/// editors show them on hover and completion.
const RULE_KEYWORDS = new Set(["if", "then", "else", "not", "allOf"]);
function missingDocs(schema, kind) {
  const problems = [];
  const resolve = (node) =>
    node && node.$ref && node.$ref.startsWith("#/") ? node.$ref.slice(2).split("/").reduce((n, k) => n[k], schema) : node;
  const visit = (node, where) => {
    if (node === null || typeof node !== "object") return;
    if (Array.isArray(node)) return node.forEach((item, i) => visit(item, `${where}/${i}`));
    for (const [key, value] of Object.entries(node)) {
      if (RULE_KEYWORDS.has(key)) continue;  // conditional rules restate keys; the docs live above
      if (key === "properties") {
        for (const [name, sub] of Object.entries(value)) {
          const target = resolve(sub);
          if (typeof target !== "object") continue;  // `false`: a key forbidden by an if/then rule
          if (!target.title || !target.description) problems.push(`${kind}: ${where}/properties/${name}`);
        }
      }
      visit(value, `${where}/${key}`);
    }
  };
  visit(schema, "#");
  return problems;
}

/// The name tables of the engine headers: { "Device": ["cpu", ...], ... } in declaration order.
function engineVocabulary(root) {
  const tables = {};
  const headers = ["engine/include/capsule/vocab.hpp", "engine/include/capsule/policy.hpp"];
  for (const header of headers) {
    const text = fs.readFileSync(path.join(root, header), "utf8");
    for (const m of text.matchAll(/\{\s*([A-Za-z]+)::[A-Za-z0-9_]+\s*,\s*"([^"]+)"\s*\}/g)) {
      (tables[m[1]] ??= []).push(m[2]);
    }
  }
  const graph = fs.readFileSync(path.join(root, "engine/src/load_graph.cpp"), "utf8");
  tables.IrAlias = [...graph.matchAll(/\{\s*"([a-z_]+)"\s*,\s*Op::/g)].map((m) => m[1]);
  const noKernel = graph.match(/kNoKernelKinds\s*\{([^}]*)\}/);
  tables.NoKernel = noKernel ? [...noKernel[1].matchAll(/"([^"]+)"/g)].map((m) => m[1]) : [];
  return tables;
}

/// Compares every enum of the schemas with the engine's spelling tables.
function vocabularyDrift(schemas, root) {
  const v = engineVocabulary(root);
  const c = schemas.catalog;
  const p = schemas.profile;
  const capsule = c.properties.capsule.items.properties;
  const evidence = c.definitions.evidence.properties;
  const target = p.properties.target.properties;
  const pairs = [
    ["catalog device", capsule.device.enum, [...v.Device, "gpu"]],
    ["catalog provider", capsule.provider.enum, v.Provider],
    ["catalog op", capsule.op.enum, v.Op],
    ["catalog trust", capsule.trust.enum, v.Trust],
    ["catalog vjp", capsule.vjp.enum, v.VjpMode],
    ["catalog reduction", capsule.reduction.enum, v.Reduction],
    ["catalog layout", c.definitions.contract_layout.properties.layout.enum, v.Layout],
    ["catalog claims", ["shape", "layout", "value", "vjp"].flatMap((f) => {
      const claim = c.definitions[`contract_${f}`].properties.claim;
      return claim.enum ?? [claim.const];
    }), v.ClaimKind],
    ["catalog evidence kind", evidence.kind.enum, v.EvidenceKind],
    ["profile device", p.properties.device.enum, [...v.Device, "gpu"]],
    ["profile provider", p.properties.availability.properties.providers.items.enum, v.Provider],
    ["profile vjp", p.properties.vjp.enum, v.VjpMode],
    ["profile lowering", p.properties.lowering.enum, v.Lowering],
    ["profile trust", p.properties.assurance.oneOf[1].properties.trust.items.enum, v.Trust],
    ["profile evidence", p.properties.assurance.oneOf[1].properties.evidence.items.enum, v.EvidenceKind],
    ["profile os", target.os.enum, v.OperatingSystem],
    ["profile arch", target.arch.enum, v.Architecture],
    ["profile accelerator", target.accelerator.enum, v.Accelerator],
    ["profile features", target.features.items.enum, v.BuildFeature],
    ["graph kind", schemas.graph.properties.node.items.properties.kind.enum, [...v.NoKernel, ...v.IrAlias, ...v.Op]],
  ];
  const problems = [];
  for (const [what, schemaValues, engineValues] of pairs) {
    if (!engineValues || engineValues.length === 0) {
      problems.push(`${what}: no spellings found in the engine sources`);
      continue;
    }
    const a = [...schemaValues].sort().join(" ");
    const b = [...engineValues].sort().join(" ");
    if (a !== b) {
      const missing = engineValues.filter((x) => !schemaValues.includes(x));
      const extra = schemaValues.filter((x) => !engineValues.includes(x));
      problems.push(`${what}: schema lacks [${missing.join(", ")}], has extra [${extra.join(", ")}]`);
    }
  }
  return { problems, compared: pairs.length };
}

// ---- modes ------------------------------------------------------------------------------------

function shipped(root) {
  const { schemas, validators } = loadSchemas();
  let failures = 0;
  const groups = [
    ["catalog", listToml(path.join(root, "catalogs"))],
    ["profile", listToml(path.join(root, "profiles"))],
    ["graph", listToml(path.join(root, "examples", "graphs"), (n) => n.endsWith(".graph.toml"))],
    ["waiver", findWaiverFiles(root)],
  ];
  const counts = [];
  const firstData = {};
  for (const [kind, files] of groups) {
    if (files.length === 0 && kind !== "waiver") {
      console.log(`FAIL no ${kind} files found under ${root}`);
      failures++;
    }
    for (const file of files) {
      const result = checkFile(validators, kind, file);
      if (!result.ok) {
        failures++;
        console.log(`FAIL ${path.relative(root, file)} (${kind} schema)`);
        for (const line of result.why) console.log(`       ${line}`);
      } else {
        firstData[kind] ??= result.data;
      }
    }
    counts.push(`${files.length} ${kind}`);
  }
  console.log(`shipped files: ${counts.join(", ")}: ${failures === 0 ? "all valid" : `${failures} failed`}`);

  const docs = KINDS.flatMap((kind) => missingDocs(schemas[kind], kind));
  for (const where of docs) console.log(`FAIL property without title/description: ${where}`);
  failures += docs.length;
  const drift = vocabularyDrift(schemas, root);
  for (const problem of drift.problems) console.log(`FAIL vocabulary drift: ${problem}`);
  failures += drift.problems.length;
  console.log(`schema hygiene: titles/descriptions ${docs.length === 0 ? "complete" : "incomplete"}; ` +
              (drift.problems.length === 0 ? `all ${drift.compared} enums match`
                                           : `${drift.problems.length} of ${drift.compared} enums differ from`) +
              " the engine's name tables");

  // Controls: a mutated copy of a valid file must be rejected, or the checks above prove nothing.
  const controls = [];
  if (firstData.catalog) {
    const bad = structuredClone(firstData.catalog);
    bad.capsule[0].provder = "reference";
    controls.push(["catalog with an unknown capsule key", "catalog", bad]);
  }
  if (firstData.profile) {
    const bad = structuredClone(firstData.profile);
    delete bad.modules;
    controls.push(["profile without `modules`", "profile", bad]);
  }
  if (firstData.graph) {
    const bad = structuredClone(firstData.graph);
    bad.node[bad.node.length - 1].kind = "rleu";
    controls.push(["graph with node kind `rleu`", "graph", bad]);
  }
  controls.push(["waivers file with a malformed change id", "waiver",
                 { schema: 1, waiver: [{ change: "weaker:capsule:x", accepted_by: "a", reason: "r", expires: "2027-01-01" }] }]);
  failures += runControls(validators, controls);
  return failures === 0 ? 0 : 1;
}

function runControls(validators, controls) {
  let failures = 0;
  for (const [what, kind, data] of controls) {
    if (validators[kind](data)) {
      console.log(`FAIL control: the ${kind} schema accepted a ${what}`);
      failures++;
    }
  }
  console.log(`controls: ${controls.length - failures}/${controls.length} mutated documents rejected`);
  return failures;
}

/// The gallery entries: single files (`# expect: L:C code` on line 1) and directories with
/// catalogs/, profiles/ and expect.txt (`file:L:C code`), as tests/test_gallery.cpp reads them.
function galleryEntries(dir) {
  const entries = [];
  for (const name of fs.readdirSync(dir).sort()) {
    const full = path.join(dir, name);
    if (fs.statSync(full).isDirectory()) {
      const expect = fs.readFileSync(path.join(full, "expect.txt"), "utf8").split("\n")[0].trim();
      entries.push({ name, dir: full, code: expect.split(" ").pop() });
    } else if (name.endsWith(".toml")) {
      const first = fs.readFileSync(full, "utf8").split("\n")[0];
      const m = first.match(/^# expect: \d+:\d+ (\S+)/);
      entries.push({ name, file: full, kind: kindOf(name, "catalog"), code: m ? m[1] : null });
    }
  }
  return entries;
}

/// Runs the loader on one entry in a scratch directory holding just that entry.
function runLoader(bin, entry, scratch) {
  const env = { ...process.env, CAPSULE_TODAY: "2026-11-29", NO_COLOR: "1" };
  const args = runLoaderArgs(entry, scratch);
  const run = spawnSync(bin, args, { env, encoding: "utf8" });
  if (run.error) throw new Error(`cannot run ${bin}: ${run.error.message}`);
  const output = `${run.stdout}${run.stderr}`;
  return { status: run.status, output, hasCode: (code) => output.includes(`[${code}]`) };
}

/// The command line that checks one entry, after copying a single-file entry into its own
/// scratch tree.
function runLoaderArgs(entry, scratch) {
  let args;
  if (entry.dir) {
    args = ["lint", "--catalogs", path.join(entry.dir, "catalogs"), "--profiles", path.join(entry.dir, "profiles")];
  } else {
    const work = fs.mkdtempSync(path.join(scratch, "entry-"));
    const catalogs = path.join(work, "catalogs");
    const profiles = path.join(work, "profiles");
    fs.mkdirSync(catalogs);
    fs.mkdirSync(profiles);
    const base = path.basename(entry.file);
    if (entry.kind === "graph") {
      fs.copyFileSync(entry.file, path.join(work, base));
      args = ["plan", "--profile", "checked_cpu", "--graph", path.join(work, base),
              "--catalogs", path.join(REPO, "catalogs"), "--profiles", path.join(REPO, "profiles")];
    } else if (entry.kind === "profile") {
      // A profile names modules, so it is linted against the shipped catalogs.
      fs.copyFileSync(entry.file, path.join(profiles, base));
      args = ["lint", "--catalogs", path.join(REPO, "catalogs"), "--profiles", profiles];
    } else {
      fs.copyFileSync(entry.file, path.join(catalogs, base));
      args = ["lint", "--catalogs", catalogs, "--profiles", profiles];
    }
  }
  return args;
}

function gallery(dir, bin) {
  const { validators } = loadSchemas();
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "capsule-schema-gallery-"));
  let failures = 0;
  const tally = { schema: 0, loader: 0, both: 0 };
  try {
    const entries = galleryEntries(dir);
    if (entries.length < 20) {
      console.log(`FAIL only ${entries.length} gallery entries under ${dir}`);
      failures++;
    }
    for (const entry of entries) {
      // Schema side: a directory entry is rejected when any of its files is.
      const files = entry.dir
        ? [...listToml(path.join(entry.dir, "catalogs")).map((f) => [f, "catalog"]),
           ...listToml(path.join(entry.dir, "profiles")).map((f) => [f, "profile"])]
        : [[entry.file, entry.kind]];
      const schemaWhy = [];
      for (const [file, kind] of files) {
        const result = checkFile(validators, kind, file);
        if (!result.ok) schemaWhy.push(`${entry.dir ? `${path.relative(entry.dir, file)}: ` : ""}${result.why[0]}`);
      }
      const schemaRejects = schemaWhy.length > 0;
      // Loader side: nonzero exit with the entry's own diagnostic code.
      const loader = runLoader(bin, entry, scratch);
      const reported = entry.code !== null && loader.hasCode(entry.code);
      const loaderRejects = loader.status !== 0 && reported;
      if (!schemaRejects && !loaderRejects) {
        failures++;
        console.log(`FAIL ${entry.name}: accepted by the schema and by the loader (exit ${loader.status}, ` +
                    `${reported ? "" : "no "}[${entry.code}] in its output)`);
        for (const line of loader.output.trim().split("\n").slice(0, 4)) console.log(`       ${line}`);
        continue;
      }
      const verdict = schemaRejects && loaderRejects ? "schema+loader" : schemaRejects ? "schema" : "loader";
      if (schemaRejects && loaderRejects) tally.both++;
      else if (schemaRejects) tally.schema++;
      else tally.loader++;
      let why = schemaRejects ? `schema: ${schemaWhy[0]}` : `loader: [${entry.code}]`;
      if (!loaderRejects) why += `; loader: exit ${loader.status}${reported ? `, [${entry.code}] only as a warning` : ""}`;
      console.log(`  ${verdict.padEnd(13)} ${entry.name}  ${why}`);
    }
    console.log(`gallery: ${entries.length} entries; rejected by schema and loader ${tally.both}, ` +
                `schema only ${tally.schema}, loader only ${tally.loader}; ${failures} failed`);

    // Controls: the same harness must let valid files through, or "the loader rejected it" means
    // nothing.
    const controls = [
      { name: "catalogs/reference.toml", file: path.join(REPO, "catalogs", "reference.toml"), kind: "catalog" },
      { name: "profiles/checked_cpu.toml", file: path.join(REPO, "profiles", "checked_cpu.toml"), kind: "profile" },
      { name: "examples/graphs/relu-chain.graph.toml", file: path.join(REPO, "examples", "graphs", "relu-chain.graph.toml"), kind: "graph" },
    ];
    let controlFailures = 0;
    for (const control of controls) {
      const run = runLoader(bin, control, scratch);
      const schemaOk = checkFile(validators, control.kind, control.file).ok;
      if (run.status !== 0 || !schemaOk) {
        controlFailures++;
        console.log(`FAIL control ${control.name}: loader exit ${run.status}, schema ${schemaOk ? "accepts" : "rejects"}; ` +
                    "the harness rejects valid files");
        for (const line of run.output.trim().split("\n").slice(0, 4)) console.log(`       ${line}`);
      }
    }
    console.log(`controls: ${controls.length - controlFailures}/${controls.length} valid files accepted by the same harness`);
    failures += controlFailures;
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
  return failures === 0 ? 0 : 1;
}

/// The SARIF 2.1.0 schema kept in the repository (tests/schemas/third_party/README.md says where it
/// comes from); its digest is pinned so nobody edits it by accident.
const SARIF_SCHEMA = path.join(REPO, "tests", "schemas", "third_party", "sarif-2.1.0-rtm.5.json");
const SARIF_SCHEMA_SHA256 = "2d99159ae54a3eea97f81781cff48780548657c35949f4b7f25e99a2ba4de4f8";

function sarifValidator() {
  const bytes = fs.readFileSync(SARIF_SCHEMA);
  const digest = crypto.createHash("sha256").update(bytes).digest("hex");
  if (digest !== SARIF_SCHEMA_SHA256) {
    console.log(`FAIL ${path.relative(REPO, SARIF_SCHEMA)} has SHA-256 ${digest}, expected ${SARIF_SCHEMA_SHA256} ` +
                "(the third-party schema is kept verbatim; see the README beside it)");
    process.exit(1);
  }
  const schema = JSON.parse(bytes.toString("utf8"));
  // The official schema is draft-04, so it is compiled by Ajv's draft-04 build. Its `language`
  // pattern has a stray `]` that only a non-unicode RegExp accepts, hence unicodeRegExp: false.
  const ajv = new AjvDraft04({ allErrors: true, strict: false, unicodeRegExp: false });
  addFormats(ajv);
  return ajv.compile(schema);
}

/// Writes the SARIF logs of `capsule lint` over the shipped tree (shipped.sarif) and over every
/// lint-checked entry of the invalid gallery (gallery-NAME.sarif) into OUT, for
/// sarif_multitool.cmake. Graph entries are skipped: `plan` reports them, not lint.
function sarifLogs(out, dir, bin) {
  fs.mkdirSync(out, { recursive: true });
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "capsule-sarif-logs-"));
  let failures = 0;
  let written = 0;
  const write = (name, args, expectFindings) => {
    const env = { ...process.env, CAPSULE_TODAY: "2026-11-29", NO_COLOR: "1" };
    const run = spawnSync(bin, [...args, "--format", "sarif"], { env, encoding: "utf8" });
    if (run.error) throw new Error(`cannot run ${bin}: ${run.error.message}`);
    if (run.status !== (expectFindings ? 1 : 0) || !run.stdout.startsWith("{")) {
      failures++;
      console.log(`FAIL ${name}: capsule lint --format sarif exited ${run.status}, expected ${expectFindings ? 1 : 0}`);
      for (const line of run.stderr.trim().split("\n").slice(0, 4)) console.log(`       ${line}`);
      return;
    }
    fs.writeFileSync(path.join(out, `${name}.sarif`), run.stdout);
    written++;
  };
  try {
    write("shipped", ["lint", "--catalogs", path.join(REPO, "catalogs"), "--profiles", path.join(REPO, "profiles")], false);
    for (const entry of galleryEntries(dir)) {
      if (entry.kind === "graph") continue;
      // The loader harness of the gallery mode, with --format sarif; exit 2 (io-error,
      // nothing-to-lint) still prints a log, which must be valid too.
      const env = { ...process.env, CAPSULE_TODAY: "2026-11-29", NO_COLOR: "1" };
      const run = spawnSync(bin, [...runLoaderArgs(entry, scratch), "--format", "sarif"], { env, encoding: "utf8" });
      if (run.error) throw new Error(`cannot run ${bin}: ${run.error.message}`);
      if (run.status === 0 || !run.stdout.startsWith("{")) {
        failures++;
        console.log(`FAIL gallery ${entry.name}: lint --format sarif exited ${run.status} without a SARIF log of findings`);
        continue;
      }
      fs.writeFileSync(path.join(out, `gallery-${entry.name.replace(/[^A-Za-z0-9._-]/g, "_")}.sarif`), run.stdout);
      written++;
    }
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
  console.log(`sarif-logs: ${written} logs written to ${out}; ${failures} failed`);
  return failures === 0 && written > 20 ? 0 : 1;
}

function sarif(file, expectResults) {
  const validate = sarifValidator();
  let log;
  try {
    log = JSON.parse(fs.readFileSync(file, "utf8"));
  } catch (error) {
    console.log(`FAIL ${file}: not JSON (${error.message})`);
    return 1;
  }
  let failures = 0;
  if (!validate(log)) {
    failures++;
    console.log(`FAIL ${file}: not valid SARIF 2.1.0`);
    for (const line of describeErrors(validate.errors, 20)) console.log(`       ${line}`);
  }
  const results = (log.runs ?? []).reduce((n, run) => n + (run.results?.length ?? 0), 0);
  if (expectResults && results === 0) {
    failures++;
    console.log(`FAIL ${file}: no results, but the scratch tree has findings`);
  }
  if (log.version !== "2.1.0") {
    failures++;
    console.log(`FAIL ${file}: version ${JSON.stringify(log.version)}, expected "2.1.0"`);
  }
  console.log(`sarif: ${path.basename(file)}: ${results} results; ${failures === 0 ? "valid SARIF 2.1.0" : "invalid"}`);

  const controls = [];
  const noVersion = structuredClone(log);
  delete noVersion.version;
  controls.push(["log without `version`", noVersion]);
  if (results > 0) {
    const badLevel = structuredClone(log);
    badLevel.runs.find((r) => r.results?.length).results[0].level = "fatal";
    controls.push(["result with level `fatal`", badLevel]);
  }
  let controlFailures = 0;
  for (const [what, data] of controls) {
    if (validate(data)) {
      controlFailures++;
      console.log(`FAIL control: the SARIF schema accepted a ${what}`);
    }
  }
  console.log(`controls: ${controls.length - controlFailures}/${controls.length} mutated logs rejected`);
  return failures + controlFailures === 0 ? 0 : 1;
}

/// Small inline documents that each schema must accept or reject; they pin the rules the shipped
/// files do not exercise (merging with [defaults], per-kind evidence keys, waivers).
function selftest() {
  const { validators } = loadSchemas();
  const contracts = `
contracts.shape  = { claim = "shape-safety", evidence = { kind = "runtime-guard", name = "g" } }
contracts.layout = { claim = "layout-compatibility", layout = "canonical-tensor", evidence = { kind = "runtime-guard", name = "g" } }
contracts.value  = { claim = "value-refinement", evidence = { kind = "test-suite", name = "s" } }
contracts.vjp    = { claim = "vjp-refinement", mode = "torchlean-tape", evidence = { kind = "test-suite", name = "s" } }`;
  const defaults = `schema = 1\nmodule = "m"\n[defaults]\nprovider = "reference"\ndevice = "cpu"\ntrust = "checked"\n` +
                   `vjp = "torchlean-tape"\nreduction = "n/a"${contracts}\n`;
  const availability = `\n[availability]\ndevices = ["cpu"]\nproviders = ["reference"]\n`;
  const profile = `schema = 1\nname = "p"\ndevice = "cpu"\nmodules = ["reference"]\n`;
  const waiver = (change, extra = "") =>
    `schema = 1\n[[waiver]]\nchange = "${change}"\naccepted_by = "Ada"\nreason = "reviewed"\nexpires = 2027-06-30\n${extra}`;
  const cases = [
    // catalogs
    [true, "catalog", "capsule inherits everything from [defaults]", `${defaults}[[capsule]]\nname = "m.relu"\nop = "relu"\n`],
    [true, "catalog", "capsule without [defaults] gives every key", `schema = 1\nmodule = "m"\n[[capsule]]\nname = "m.relu"\nop = "relu"\n` +
      `provider = "reference"\ndevice = "gpu"\ntrust = "checked"\nvjp = "torchlean-tape"\nreduction = "n/a"${contracts}\n`],
    [true, "catalog", "vjp none with vjp-unavailable", `${defaults}[[capsule]]\nname = "m.r"\nop = "rand_uniform"\nvjp = "none"\n` +
      `contracts.vjp = { claim = "vjp-unavailable", evidence = { kind = "not-applicable" } }\n`],
    [true, "catalog", "trusted-external with reason and expiry", `${defaults}[[capsule]]\nname = "m.relu"\nop = "relu"\n` +
      `trust = "trusted-external"\nreason = "vendor"\nexpires = 2027-06-30\n` +
      `contracts.value = { claim = "value-refinement", evidence = { kind = "trusted-boundary", reason = "vendor", owner = "o", expires = 2027-06-30 } }\n`],
    [false, "catalog", "capsule missing `op` (not in [defaults])", `${defaults}[[capsule]]\nname = "m.relu"\n`],
    [false, "catalog", "no [defaults] and capsule missing `reduction`", `schema = 1\nmodule = "m"\n[[capsule]]\nname = "m.relu"\nop = "relu"\n` +
      `provider = "reference"\ndevice = "cpu"\ntrust = "checked"\nvjp = "torchlean-tape"${contracts}\n`],
    [false, "catalog", "capsule misses contracts.vjp that [defaults] lacks", `schema = 1\nmodule = "m"\n[[capsule]]\nname = "m.relu"\nop = "relu"\n` +
      `provider = "reference"\ndevice = "cpu"\ntrust = "checked"\nvjp = "torchlean-tape"\nreduction = "n/a"\n` +
      `contracts.shape = { claim = "shape-safety", evidence = { kind = "runtime-guard", name = "g" } }\n` +
      `contracts.layout = { claim = "layout-compatibility", layout = "canonical-tensor", evidence = { kind = "runtime-guard", name = "g" } }\n` +
      `contracts.value = { claim = "value-refinement", evidence = { kind = "test-suite", name = "s" } }\n`],
    [false, "catalog", "unknown key in [defaults]", defaults.replace("[defaults]\n", "[defaults]\nprovder = \"x\"\n") + `[[capsule]]\nname = "a"\nop = "relu"\n`],
    [false, "catalog", "trusted-external without a reason", `${defaults}[[capsule]]\nname = "m.relu"\nop = "relu"\ntrust = "trusted-external"\n`],
    [false, "catalog", "trusted-boundary evidence without a reason", `${defaults}[[capsule]]\nname = "m.relu"\nop = "relu"\n` +
      `contracts.value = { claim = "value-refinement", evidence = { kind = "trusted-boundary" } }\n`],
    [false, "catalog", "test-suite evidence with a reason", `${defaults}[[capsule]]\nname = "m.relu"\nop = "relu"\n` +
      `contracts.value = { claim = "value-refinement", evidence = { kind = "test-suite", name = "s", reason = "r" } }\n`],
    [false, "catalog", "layout-compatibility claim without a layout", `${defaults}[[capsule]]\nname = "m.relu"\nop = "relu"\n` +
      `contracts.layout = { claim = "layout-compatibility", evidence = { kind = "runtime-guard", name = "g" } }\n`],
    [false, "catalog", "value claim in the shape field", `${defaults}[[capsule]]\nname = "m.relu"\nop = "relu"\n` +
      `contracts.shape = { claim = "value-refinement", evidence = { kind = "test-suite", name = "s" } }\n`],
    [false, "catalog", "vjp none with a vjp-refinement claim on the same capsule", `${defaults}[[capsule]]\nname = "m.r"\nop = "rand_uniform"\nvjp = "none"\n` +
      `contracts.vjp = { claim = "vjp-refinement", mode = "torchlean-tape", evidence = { kind = "test-suite", name = "s" } }\n`],
    [true, "catalog", "capsule overrides vjp and contracts.vjp together", `${defaults}[[capsule]]\nname = "m.relu"\nop = "relu"\nvjp = "backend-vjp"\n` +
      `contracts.vjp = { claim = "vjp-refinement", mode = "backend-vjp", evidence = { kind = "test-suite", name = "s" } }\n`],
    [false, "catalog", "capsule vjp differs from the mode of the inherited vjp contract", `${defaults}[[capsule]]\nname = "m.relu"\nop = "relu"\nvjp = "backend-vjp"\n`],
    [false, "catalog", "vjp-unavailable contract under an inherited torchlean-tape vjp", `${defaults}[[capsule]]\nname = "m.relu"\nop = "relu"\n` +
      `contracts.vjp = { claim = "vjp-unavailable", evidence = { kind = "not-applicable" } }\n`],
    [false, "catalog", "expires given as a date-time", `${defaults}[[capsule]]\nname = "m.relu"\nop = "relu"\nexpires = 2027-06-30T00:00:00\n`],
    [false, "catalog", "schema = 1.0 (a float)", defaults.replace("schema = 1", "schema = 1.0") + `[[capsule]]\nname = "a"\nop = "relu"\n`],
    // profiles
    [true, "profile", "minimal profile with [availability]", profile + availability],
    [true, "profile", "profile with [target] and custom assurance", profile +
      `provider = { only = "reference" }\nassurance = { trust = ["checked"], evidence = ["test-suite"] }\n[target]\nos = "linux"\narch = "x86_64"\naccelerator = "none"\n`],
    [false, "profile", "neither [availability] nor [target]", profile],
    [false, "profile", "both [availability] and [target]", profile + availability + `[target]\nos = "linux"\n`],
    [false, "profile", "provider table with prefer and only", profile + `provider = { prefer = "libtorch", only = "reference" }\n` + availability],
    [false, "profile", "provider given as a bare name", profile + `provider = "libtorch"\n` + availability],
    [true, "profile", "cuda profile declaring the gpu alias", profile.replace('device = "cpu"', 'device = "cuda"') +
      `\n[availability]\ndevices = ["cpu", "gpu"]\nproviders = ["reference"]\n`],
    [false, "profile", "device missing from its own [availability]", profile.replace('device = "cpu"', 'device = "cuda"') + availability],
    [false, "profile", "device is not the [target] accelerator", profile.replace('device = "cpu"', 'device = "metal"') + `[target]\naccelerator = "cuda"\n`],
    [false, "profile", "custom assurance admitting no trust level", profile + `assurance = { trust = [], evidence = ["test-suite"] }\n` + availability],
    [false, "profile", "a module listed twice", profile.replace('["reference"]', '["reference", "reference"]') + availability],
    // graphs
    [true, "graph", "graph with payload keys and an IR alias", `schema = 1\nname = "g"\n[[node]]\nid = 0\nkind = "input"\nshape = [4]\n` +
      `[[node]]\nid = 1\nkind = "flatten"\ninputs = [0]\nfrom = [4]\nto = [1, 4]\n`],
    [false, "graph", "negative node id", `schema = 1\n[[node]]\nid = -1\nkind = "input"\n`],
    [false, "graph", "node without kind", `schema = 1\n[[node]]\nid = 0\n`],
    // waivers
    [true, "waiver", "one waiver", waiver("weakened:capsule:reference.relu:value")],
    [true, "waiver", "an empty waivers file", "schema = 1\n"],
    [false, "waiver", "malformed change id", waiver("weakened:capsule:value")],
    [false, "waiver", "waiver without expires", waiver("weakened:capsule:a:value").replace("expires = 2027-06-30\n", "")],
    [false, "waiver", "expires as a quoted string that is not a date", waiver("weakened:capsule:a:value").replace("2027-06-30", '"soon"')],
    [false, "waiver", "unknown waiver key", waiver("weakened:capsule:a:value", "acceptedby = \"x\"\n")],
  ];
  let failures = 0;
  for (const [expected, kind, what, text] of cases) {
    let data;
    try {
      data = toJson(toml.parse(text, { integersAsBigInt: true }));
    } catch (error) {
      failures++;
      console.log(`FAIL selftest case is not TOML: ${kind}: ${what}: ${error.message.split("\n")[0]}`);
      continue;
    }
    const ok = validators[kind](data);
    if (ok !== expected) {
      failures++;
      console.log(`FAIL ${kind} schema ${ok ? "accepts" : "rejects"}: ${what}`);
      for (const line of describeErrors(validators[kind].errors)) console.log(`       ${line}`);
    }
  }
  const accepted = cases.filter((c) => c[0]).length;
  console.log(`selftest: ${cases.length} cases (${accepted} valid, ${cases.length - accepted} invalid); ${failures} failed`);
  return failures === 0 ? 0 : 1;
}

function runValidator() {
  const ajv = new Ajv({ allErrors: true, verbose: true, strict: true, strictTypes: false, strictRequired: false });
  addFormats(ajv);
  const schema = JSON.parse(fs.readFileSync(path.join(SCHEMA_DIR, "run.schema.json"), "utf8"));
  return { schema, validate: ajv.compile(schema) };
}

function runOutput(file, expectRechecks) {
  const { schema, validate } = runValidator();
  let output;
  try {
    output = JSON.parse(fs.readFileSync(file, "utf8"));
  } catch (error) {
    console.log(`FAIL ${file}: not JSON (${error.message})`);
    return 1;
  }
  let failures = 0;
  if (!validate(output)) {
    failures++;
    console.log(`FAIL ${file}: not valid against run.schema.json`);
    for (const line of describeErrors(validate.errors, 20)) console.log(`       ${line}`);
  }
  const docs = missingDocs(schema, "run");
  for (const where of docs) console.log(`FAIL property without title/description: ${where}`);
  failures += docs.length;
  const checked = (output.capsules_used ?? []).filter((use) => (use.rechecks ?? []).length > 0);
  const obligations = new Set(checked.flatMap((use) => use.rechecks.map((r) => r.obligation)));
  if (expectRechecks && !(obligations.has("value") && obligations.has("vjp"))) {
    failures++;
    console.log(`FAIL ${file}: expected value and vjp rechecks, found ${[...obligations].join(", ") || "none"}`);
  }
  console.log(`run: ${path.basename(file)}: ${checked.length} capsules rechecked; ` +
              (failures === 0 ? "valid run output" : "invalid"));

  // Controls: the schema must reject what a reader of `rechecks` relies on being absent.
  const controls = [];
  const firstRecheck = (doc) => doc.capsules_used.find((use) => (use.rechecks ?? []).length > 0).rechecks[0];
  if (checked.length > 0) {
    const badObligation = structuredClone(output);
    firstRecheck(badObligation).obligation = "shape";
    controls.push(["recheck of the shape obligation", badObligation]);
    const noPassed = structuredClone(output);
    delete firstRecheck(noPassed).checks_passed;
    controls.push(["recheck without checks_passed", noPassed]);
    const badPolicy = structuredClone(output);
    firstRecheck(badPolicy).policy = { every: 2, sample: 0.5 };
    controls.push(["recheck policy naming both every and sample", badPolicy]);
  }
  if (output.target_declaration !== undefined) {
    // Only os and arch are compared, and only the declared ones: nothing else may appear.
    const accelerator = structuredClone(output);
    accelerator.target_declaration.declared.accelerator = "none";
    controls.push(["target declaration that names an accelerator", accelerator]);
    const empty = structuredClone(output);
    empty.target_declaration.this_build = {};
    controls.push(["target declaration with no platform field", empty]);
  }
  if (output.error === undefined) {
    const noUses = structuredClone(output);
    delete noUses.capsules_used;
    controls.push(["run output without capsules_used", noUses]);
  } else {
    // A refusal must carry its error, and never results beside it.
    const noError = structuredClone(output);
    delete noError.error;
    controls.push(["refusal without its error", noError]);
    const withResults = structuredClone(output);
    withResults.capsules_used = [];
    controls.push(["refusal that also lists capsules used", withResults]);
  }
  let controlFailures = 0;
  for (const [what, doc] of controls) {
    if (validate(doc)) {
      console.log(`FAIL control: run.schema.json accepted a ${what}`);
      controlFailures++;
    }
  }
  console.log(`controls: ${controls.length - controlFailures}/${controls.length} mutated documents rejected`);
  return failures + controlFailures === 0 ? 0 : 1;
}

// ---- main -------------------------------------------------------------------------------------

const [mode, ...args] = process.argv.slice(2);
const usage =
  "usage: validate.mjs shipped ROOT | gallery DIR CAPSULE_BIN | sarif FILE [--expect-results] | " +
  "run FILE [--expect-rechecks] | selftest | sarif-logs OUT GALLERY_DIR CAPSULE_BIN";
let status;
if (mode === "shipped" && args.length === 1) status = shipped(path.resolve(args[0]));
else if (mode === "gallery" && args.length === 2) status = gallery(path.resolve(args[0]), path.resolve(args[1]));
else if (mode === "sarif" && (args.length === 1 || (args.length === 2 && args[1] === "--expect-results")))
  status = sarif(path.resolve(args[0]), args.length === 2);
else if (mode === "run" && (args.length === 1 || (args.length === 2 && args[1] === "--expect-rechecks")))
  status = runOutput(path.resolve(args[0]), args.length === 2);
else if (mode === "selftest" && args.length === 0) status = selftest();
else if (mode === "sarif-logs" && args.length === 3) status = sarifLogs(path.resolve(args[0]), path.resolve(args[1]), path.resolve(args[2]));
else {
  console.error(usage);
  status = 2;
}
process.exit(status);
