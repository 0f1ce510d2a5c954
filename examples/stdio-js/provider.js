// kv: key/value entries in a JSON file, as an oprov stdio provider (docs/stdio-protocol.md).
const fs = require("fs");
const readline = require("readline");

const S = { type: "string" };
const SCHEMA = {
  provider: { attributes: { path: { ...S, required: true, description: "the JSON file entries live in" } } },
  resources: { kv_entry: { attributes: {
    key: { ...S, required: true, replace: true }, value: { ...S, required: true },
    id: { ...S, computed: true }, revision: { type: "number", computed: true } } } },
  data_sources: { kv_keys: { attributes: {
    prefix: { ...S, optional: true }, keys: { type: ["list", "string"], computed: true } } } },
  functions: { entry_id: { parameters: [{ name: "key", type: "string" }], return: "string" } },
};
let path = null;

const fail = (message, path, code = 1) => Object.assign(new Error(message), { code, at: path });
const load = () => (fs.existsSync(path) ? JSON.parse(fs.readFileSync(path, "utf8")) : {});
const save = (db) => { fs.writeFileSync(path + ".tmp", JSON.stringify(db)); fs.renameSync(path + ".tmp", path); };
const state = (key, e) => e ? { key, value: e.value, id: "kv:" + key, revision: e.revision } : null;

function put(c, revision) {
  const db = load();
  db[c.key] = { value: c.value, revision };
  save(db);
  return { state: state(c.key, db[c.key]) };
}

const methods = {
  initialize: () => ({ protocol_version: "1", provider: { name: "kv", version: "0.1.0" }, schema: SCHEMA }),
  configure: (p) => { path = p.config.path; return {}; },
  create: (p) => {
    if (p.config.key in load()) throw fail(`key ${p.config.key} already exists`, ["key"]);
    return put(p.config, 1);
  },
  update: (p) => put(p.config, p.prior.revision + 1),
  read: (p) => ({ state: state(p.state.key, load()[p.state.key]) }),
  import: (p) => ({ state: state(p.id, load()[p.id]) }),
  delete: (p) => { const db = load(); delete db[p.state.key]; save(db); return {}; },
  read_data: (p) => ({ state: { keys: Object.keys(load()).filter((k) => k.startsWith(p.config.prefix || "")).sort() } }),
  call: (p) => ({ result: "kv:" + p.args[0] }),
};

readline.createInterface({ input: process.stdin }).on("line", (line) => {
  const req = JSON.parse(line);
  let out;
  try {
    const m = methods[req.method];
    if (!m) throw fail("no method " + req.method, null, -32601);
    out = { result: m(req.params || {}) };
  } catch (e) {
    out = { error: { code: typeof e.code === "number" ? e.code : 1, message: e.message, data: { path: e.at } } };
  }
  process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id: req.id, ...out }) + "\n");
});
