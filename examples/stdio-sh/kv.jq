# kv's logic: one request in, {reply, db?, path?} out; $db is the database as it stands.
def schema: {
  provider: {attributes: {path: {type: "string", required: true, description: "the JSON file entries live in"}}},
  resources: {kv_entry: {attributes: {
    key: {type: "string", required: true, replace: true}, value: {type: "string", required: true},
    id: {type: "string", computed: true}, revision: {type: "number", computed: true}}}},
  data_sources: {kv_keys: {attributes: {
    prefix: {type: "string", optional: true}, keys: {type: ["list", "string"], computed: true}}}},
  functions: {entry_id: {parameters: [{name: "key", type: "string"}], return: "string"}}};
def state($k; $e): if $e == null then null else {key: $k, value: $e.value, id: ("kv:" + $k), revision: $e.revision} end;
def ok($r): {reply: {jsonrpc: "2.0", id: .id, result: $r}};
def fail($code; $msg; $path): {reply: {jsonrpc: "2.0", id: .id, error: {code: $code, message: $msg, data: {path: $path}}}};
.params as $p | .method as $m |
if $m == "initialize" then ok({protocol_version: "1", provider: {name: "kv", version: "0.1.0"}, schema: schema})
elif $m == "configure" then ok({}) + {path: $p.config.path}
elif $m == "create" and ($db | has($p.config.key)) then fail(1; "key \($p.config.key) already exists"; ["key"])
elif $m == "create" or $m == "update" then
  $p.config.key as $k | (if $m == "create" then 1 else $p.prior.revision + 1 end) as $rev
  | ($db + {($k): {value: $p.config.value, revision: $rev}}) as $new | ok({state: state($k; $new[$k])}) + {db: $new}
elif $m == "read" then ok({state: state($p.state.key; $db[$p.state.key])})
elif $m == "import" then ok({state: state($p.id; $db[$p.id])})
elif $m == "delete" then ok({}) + {db: ($db | del(.[$p.state.key]))}
elif $m == "read_data" then ok({state: {keys: ($db | keys | map(select(startswith($p.config.prefix // ""))))}})
elif $m == "call" then ok({result: ("kv:" + $p.args[0])})
else fail(-32601; "no method \($m)"; null) end
