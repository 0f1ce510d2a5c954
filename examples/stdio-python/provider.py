#!/usr/bin/env python3
"""kv: key/value entries in a JSON file, as an oprov stdio provider (docs/stdio-protocol.md)."""
import json, os, sys

S = {"type": "string"}
SCHEMA = {
    "provider": {"attributes": {"path": {**S, "required": True, "description": "the JSON file entries live in"}}},
    "resources": {"kv_entry": {"attributes": {
        "key": {**S, "required": True, "replace": True}, "value": {**S, "required": True},
        "id": {**S, "computed": True}, "revision": {"type": "number", "computed": True}}}},
    "data_sources": {"kv_keys": {"attributes": {
        "prefix": {**S, "optional": True}, "keys": {"type": ["list", "string"], "computed": True}}}},
    "functions": {"entry_id": {"parameters": [{"name": "key", "type": "string"}], "return": "string"}},
}
path = None


class Fail(Exception):
    def __init__(self, msg, at=None, code=1):
        super().__init__(msg)
        self.at, self.code = at, code


def load():
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def save(db):
    with open(path + ".tmp", "w") as f:
        json.dump(db, f)
    os.replace(path + ".tmp", path)


def state(key, e):
    return e and {"key": key, "value": e["value"], "id": "kv:" + key, "revision": e["revision"]}


def put(c, revision):
    db = load()
    db[c["key"]] = {"value": c["value"], "revision": revision}
    save(db)
    return {"state": state(c["key"], db[c["key"]])}


def handle(method, p):
    global path
    if method == "initialize":
        return {"protocol_version": "1", "provider": {"name": "kv", "version": "0.1.0"}, "schema": SCHEMA}
    if method == "configure":
        path = p["config"]["path"]
        return {}
    if method == "create":
        if p["config"]["key"] in load():
            raise Fail("key %s already exists" % p["config"]["key"], ["key"])
        return put(p["config"], 1)
    if method == "update":
        return put(p["config"], p["prior"]["revision"] + 1)
    if method in ("read", "import"):
        key = p["state"]["key"] if method == "read" else p["id"]
        return {"state": state(key, load().get(key))}
    if method == "delete":
        db = load()
        db.pop(p["state"]["key"], None)
        save(db)
        return {}
    if method == "read_data":
        prefix = p["config"]["prefix"] or ""
        return {"state": {"keys": sorted(k for k in load() if k.startswith(prefix))}}
    if method == "call":
        return {"result": "kv:" + p["args"][0]}
    raise Fail("no method " + method, code=-32601)


for line in sys.stdin:
    req = json.loads(line)
    try:
        out = {"result": handle(req["method"], req.get("params", {}))}
    except Fail as e:
        out = {"error": {"code": e.code, "message": str(e), "data": {"path": e.at}}}
    print(json.dumps({"jsonrpc": "2.0", "id": req["id"], **out}), flush=True)
