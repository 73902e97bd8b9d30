#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
// A scripted editor session against Taplo's language server (docs/schemas.md, "Using them in an
// editor"): proves that an editor completes keys and shows their descriptions inside a catalog's
// [[capsule]] tables, and still reports the strict schema's rules there.
//
//   node editor_lsp.mjs ROOT     ROOT is the repository; its .taplo.toml associates the schemas
//
// The server is `@taplo/lsp`, the WebAssembly build of Taplo's language server that the Even
// Better TOML extension runs (the npm `@taplo/cli` is built without `taplo lsp`). It runs in this
// process and we speak JSON-RPC to it as an editor does: initialize, didOpen, completion, hover.
// Probe documents are opened under ROOT/catalogs/ (they never touch the disk), so the schema comes
// from the repository's own .taplo.toml rule. The server reads only files inside ROOT, and its
// schema-catalog download is refused, so the test never uses the network.
//
// Exit status: 0 pass, 1 a check failed, 2 usage or set-up error, 77 skipped (Taplo's language
// server is not installed; CTest reports it as skipped with that reason).
import fs from "node:fs";
import path from "node:path";
import { Writable } from "node:stream";
import { fileURLToPath, pathToFileURL } from "node:url";

const SKIP = 77;
const REQUEST_TIMEOUT_MS = 30000;
const NOTIFICATION_TIMEOUT_MS = 30000;

const [rootArg, ...extra] = process.argv.slice(2);
if (!rootArg || extra.length !== 0) {
  console.error("usage: editor_lsp.mjs ROOT");
  process.exit(2);
}
const ROOT = fs.realpathSync(path.resolve(rootArg));
const SCHEMA_FILE = path.join(ROOT, "tools", "schemas", "catalog.schema.json");

let TaploLsp;
try {
  ({ TaploLsp } = (await import("@taplo/lsp")).default);
} catch (error) {
  console.log(`SKIP: Taplo's language server (npm @taplo/lsp) is not installed (${error.code ?? error.message}); ` +
              "run `npm ci --prefix tools/schema-check` (tools/setup.sh does it)");
  process.exit(SKIP);
}

// ---- a minimal editor: the server's environment and a JSON-RPC client --------------------------

/// Only files inside ROOT may be read: the server asks for .taplo.toml and the schemas it names.
function insideRoot(file) {
  let real;
  try {
    real = fs.realpathSync(file);
  } catch {
    return false;
  }
  return real === ROOT || real.startsWith(ROOT + path.sep);
}

const serverLog = [];  // the server's own log, printed only when a check fails
const logSink = new Writable({
  write(chunk, _encoding, done) {
    serverLog.push(chunk.toString());
    done();
  },
});

// No network: Taplo fetches the SchemaStore catalog at start-up; refuse it at once.
globalThis.fetch = async () => {
  throw new Error("editor_lsp.mjs: the network is not used");
};

const environment = {
  now: () => new Date(),
  envVar: () => undefined,  // Taplo's settings come from .taplo.toml, not from our environment
  envVars: () => [],
  stdErrAtty: () => false,
  stdin: async () => new Uint8Array(),
  stdout: logSink,
  stderr: logSink,
  glob: () => [],
  readFile: async (file) => {
    if (!insideRoot(file)) throw new Error(`editor_lsp.mjs: refusing to read outside the repository: ${file}`);
    return fs.promises.readFile(file);
  },
  writeFile: async (file) => {
    throw new Error(`editor_lsp.mjs: the session writes nothing (${file})`);
  },
  urlToFilePath: (url) => (url.startsWith("file:") ? fileURLToPath(url) : url),
  isAbsolute: (file) => path.isAbsolute(file),
  cwd: () => ROOT,
  findConfigFile: (from) => {
    for (const name of [".taplo.toml", "taplo.toml"]) {
      const candidate = path.join(from, name);
      if (insideRoot(candidate)) return candidate;
    }
    return undefined;
  },
};

const pending = new Map();
const diagnostics = new Map();      // uri -> latest diagnostics
const associations = new Map();     // uri -> schema uri the server associated
let nextId = 1;
let server;

function onServerMessage(message) {
  if (message.id !== undefined && message.method !== undefined) {
    // A request from the server: settings (schemas on, no catalogs to download) or a no-op.
    const result = message.method === "workspace/configuration"
      ? message.params.items.map(() => ({ schema: { enabled: true, catalogs: [] } }))
      : null;
    server.send({ jsonrpc: "2.0", id: message.id, result });
  } else if (message.id !== undefined) {
    pending.get(message.id)?.(message);
    pending.delete(message.id);
  } else if (message.method === "textDocument/publishDiagnostics") {
    diagnostics.set(message.params.uri, message.params.diagnostics);
  } else if (message.method === "taplo/didChangeSchemaAssociation") {
    associations.set(message.params.documentUri, message.params.schemaUri);
  }
}

function request(method, params) {
  const id = nextId++;
  server.send({ jsonrpc: "2.0", id, method, params });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer to ${method} within ${REQUEST_TIMEOUT_MS} ms`)),
                             REQUEST_TIMEOUT_MS);
    pending.set(id, (message) => {
      clearTimeout(timer);
      if (message.error) reject(new Error(`${method} failed: ${JSON.stringify(message.error)}`));
      else resolve(message.result);
    });
  });
}

function notify(method, params) {
  server.send({ jsonrpc: "2.0", method, params });
}

/// Opens MARKED as ROOT/FILE; each `‸` marks a position, returned in order and removed.
function open(file, marked) {
  const uri = pathToFileURL(path.join(ROOT, file)).href;
  const marks = [];
  const lines = marked.split("\n").map((line, lineNo) => {
    for (let at = line.indexOf("‸"); at >= 0; at = line.indexOf("‸")) {
      marks.push({ line: lineNo, character: at });
      line = line.slice(0, at) + line.slice(at + 1);
    }
    return line;
  });
  notify("textDocument/didOpen", { textDocument: { uri, languageId: "toml", version: 1, text: lines.join("\n") } });
  return { uri, marks };
}

async function completionItems(uri, position) {
  const result = await request("textDocument/completion", { textDocument: { uri }, position });
  const items = Array.isArray(result) ? result : result?.items ?? [];
  return new Map(items.map((item) => [item.label, item]));
}

async function hoverText(uri, position) {
  const result = await request("textDocument/hover", { textDocument: { uri }, position });
  const contents = result?.contents;
  if (!contents) return "";
  return typeof contents === "string" ? contents : contents.value ?? "";
}

/// The first truthy value of PROBE, polled until NOTIFICATION_TIMEOUT_MS has passed (else undefined).
async function eventually(probe) {
  const deadline = Date.now() + NOTIFICATION_TIMEOUT_MS;
  for (;;) {
    const found = probe();
    if (found || Date.now() >= deadline) return found || undefined;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/// The server validates asynchronously and first publishes empty diagnostics (before the schema is
/// loaded), so wait for a non-empty list.
async function diagnosticsFor(uri) {
  return (await eventually(() => (diagnostics.get(uri)?.length ? diagnostics.get(uri) : undefined))) ?? [];
}

// ---- the session ------------------------------------------------------------------------------

const schema = JSON.parse(fs.readFileSync(SCHEMA_FILE, "utf8"));
const readSchema = (name) => JSON.parse(fs.readFileSync(path.join(ROOT, "tools", "schemas", name), "utf8"));
const graphNodeKeys = readSchema("graph.schema.json").properties.node.items.properties;
const waiverKeys = readSchema("waiver.schema.json").properties.waiver.items.properties;
const capsuleKeys = schema.properties.capsule.items.properties;
const describe = {
  provider: capsuleKeys.provider.description,
  device: capsuleKeys.device.description,
  claim: schema.definitions.contract_shape.properties.claim.description,
  evidenceKind: schema.definitions.evidence.properties.kind.description,
};

let failures = 0;
let checks = 0;
function check(ok, what, detail) {
  checks++;
  if (ok) {
    console.log(`ok   ${what}`);
  } else {
    failures++;
    console.log(`FAIL ${what}${detail === undefined ? "" : `: ${JSON.stringify(detail)}`}`);
  }
}

async function session() {
  server = await TaploLsp.initialize(environment, { onMessage: onServerMessage });
  const rootUri = pathToFileURL(ROOT).href;
  await request("initialize", {
    processId: process.pid,
    rootUri,
    workspaceFolders: [{ uri: rootUri, name: "capsule" }],
    capabilities: {
      workspace: { configuration: true, workspaceFolders: true },
      textDocument: {
        completion: { completionItem: { documentationFormat: ["markdown", "plaintext"] } },
        hover: { contentFormat: ["markdown", "plaintext"] },
      },
    },
  });
  notify("initialized", {});

  // 1. Completion on an empty line of a [[capsule]] table whose module gives op and reduction.
  const completing = open("catalogs/lsp-probe-completion.toml", [
    "schema = 1",
    'module = "lsp-probe"',
    "",
    "[defaults]",
    'op = "relu"',
    'reduction = "n/a"',
    "",
    "[[capsule]]",
    'name = "lsp-probe.relu"',
    'contracts.shape = { claim = "shape-safety", evidence = { kind = "runtime-guard", name = "probe checks" } }',
    "‸",
  ].join("\n"));
  const offered = await completionItems(completing.uri, completing.marks[0]);
  for (const key of ["provider", "device", "trust", "vjp", "forward", "summary", "contracts.value.claim",
                     "contracts.value.evidence.kind"]) {
    check(offered.has(key), `completion inside [[capsule]] offers \`${key}\``, [...offered.keys()].slice(0, 12));
  }
  check(!offered.has("name") && !offered.has("contracts.shape.claim"),
        "completion inside [[capsule]] leaves out the keys the table already has");
  const providerDoc = offered.get("provider")?.documentation;
  check((typeof providerDoc === "string" ? providerDoc : providerDoc?.value ?? "").includes(describe.provider),
        "the completion item for `provider` carries the schema's description", providerDoc);

  // 2. Hover on keys: a capsule's own keys (in the first and a later entry), a contract's claim
  //    and an evidence kind inside inline tables.
  const hovering = open("catalogs/lsp-probe-hover.toml", [
    "schema = 1",
    'module = "lsp-probe"',
    "",
    "[[capsule]]",
    'name = "lsp-probe.relu"',
    '‸provider = "reference"',
    'contracts.shape = { ‸claim = "shape-safety", evidence = { ‸kind = "runtime-guard", name = "probe checks" } }',
    "",
    "[[capsule]]",
    'name = "lsp-probe.relu-cuda"',
    'dev‸ice = "cuda"',
  ].join("\n"));
  const [onProvider, onClaim, onKind, onDevice] = hovering.marks;
  const expected = [
    [onProvider, "provider", describe.provider],
    [onClaim, "contracts.shape.claim", describe.claim],
    [onKind, "contracts.shape.evidence.kind", describe.evidenceKind],
    [onDevice, "device (second [[capsule]])", describe.device],
  ];
  for (const [position, what, description] of expected) {
    const shown = await hoverText(hovering.uri, position);
    check(shown.includes(description), `hover on \`${what}\` shows the key's description`, shown);
  }

  // The same array-of-tables lookup serves a graph's [[node]] and a waivers file's [[waiver]].
  const graph = open("examples/graphs/lsp-probe.graph.toml",
                     ["schema = 1", 'name = "lsp-probe"', "", "[[node]]", "id = 0", 'ki‸nd = "input"', "shape = [4]"].join("\n"));
  const kindShown = await hoverText(graph.uri, graph.marks[0]);
  check(kindShown.includes(graphNodeKeys.kind.description), "hover on `kind` in a graph's [[node]] shows its description",
        kindShown);
  const waivers = open("lsp-probe.waivers.toml",
                       ["[[waiver]]", 'cha‸nge = "weakened:capsule:reference.relu:value"'].join("\n"));
  const changeShown = await hoverText(waivers.uri, waivers.marks[0]);
  check(changeShown.includes(waiverKeys.change.description), "hover on `change` in a [[waiver]] shows its description",
        changeShown);

  // 3. The strict rules still reach the editor: a capsule whose vjp is "none" but whose vjp
  //    contract claims a refinement is flagged (the rule now stated from the schema's root).
  const breaking = open("catalogs/lsp-probe-rules.toml", [
    "schema = 1",
    'module = "lsp-probe"',
    "",
    "[[capsule]]",
    'name = "lsp-probe.relu"',
    'op = "relu"',
    'provider = "reference"',
    'device = "cpu"',
    'trust = "checked"',
    'vjp = "none"',
    'reduction = "n/a"',
    'contracts.shape = { claim = "shape-safety", evidence = { kind = "runtime-guard", name = "probe checks" } }',
    'contracts.layout = { claim = "layout-compatibility", layout = "canonical-tensor", evidence = { kind = "runtime-guard", name = "probe checks" } }',
    'contracts.value = { claim = "value-refinement", evidence = { kind = "test-suite", name = "reference.values" } }',
    'contracts.vjp = { claim = "vjp-refinement", mode = "torchlean-tape", evidence = { kind = "test-suite", name = "reference.vjps" } }',
  ].join("\n"));
  const flagged = await diagnosticsFor(breaking.uri);
  check(flagged.some((d) => /vjp-unavailable/.test(d.message)),
        "the editor flags a vjp contract that disagrees with `vjp = \"none\"`", flagged.map((d) => d.message));

  // The schema came from the repository's .taplo.toml (the server announces it once it has read
  // the workspace settings, after the first diagnostics).
  const schemaUri = await eventually(() => associations.get(completing.uri));
  check(schemaUri === pathToFileURL(SCHEMA_FILE).href,
        ".taplo.toml associates catalogs/*.toml with tools/schemas/catalog.schema.json", schemaUri ?? "no association");
}

const watchdog = setTimeout(() => {
  console.log("FAIL the language-server session did not finish within 120 s");
  process.exit(1);
}, 120000);

try {
  await session();
} catch (error) {
  failures++;
  console.log(`FAIL ${JSON.stringify(String(error.message ?? error))}`);
}
clearTimeout(watchdog);
if (failures > 0) {
  // The end of the server's log says what it made of the schema; its start is the refused download.
  console.log("--- end of Taplo's log ---");
  console.log(serverLog.join("").trimEnd().slice(-6000));
}
console.log(`${checks - failures}/${checks} editor checks passed`);
process.exit(failures === 0 ? 0 : 1);
