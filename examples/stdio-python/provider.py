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
    return json.load(open(path)) if os.path.exists(path) else {}


def save(db):
    json.dump(db, open(path + ".tmp", "w"))
    os.replace(path + ".tmp", path)


def state(key, e):
    return e and {"key": key, "value": e["value"], "id": "kv:" + key, "revision": e["revision"]}


def put(c, revision):
    db = load()
    db[c["key"]] = {"value": c["value"], "revision": revision}
    save(db)
    return {"state": state(c["key"], db[c["key"]])}


def create(p):
    if p["config"]["key"] in load():
        raise Fail("key %s already exists" % p["config"]["key"], ["key"])
    return put(p["config"], 1)


def delete(p):
    db = load()
    db.pop(p["state"]["key"], None)
    save(db)
    return {}


METHODS = {
    "initialize": lambda p: {"protocol_version": "1", "provider": {"name": "kv", "version": "0.1.0"}, "schema": SCHEMA},
    "configure": lambda p: globals().update(path=p["config"]["path"]) or {},
    "create": create, "delete": delete,
    "update": lambda p: put(p["config"], p["prior"]["revision"] + 1),
    "read": lambda p: {"state": state(p["state"]["key"], load().get(p["state"]["key"]))},
    "import": lambda p: {"state": state(p["id"], load().get(p["id"]))},
    "read_data": lambda p: {"state": {"keys": sorted(k for k in load() if k.startswith(p["config"]["prefix"] or ""))}},
    "call": lambda p: {"result": "kv:" + p["args"][0]},
}

for line in sys.stdin:
    req = json.loads(line)
    try:
        if req["method"] not in METHODS:
            raise Fail("no method " + req["method"], code=-32601)
        out = {"result": METHODS[req["method"]](req.get("params", {}))}
    except Fail as e:
        out = {"error": {"code": e.code, "message": str(e), "data": {"path": e.at}}}
    print(json.dumps({"jsonrpc": "2.0", "id": req["id"], **out}), flush=True)
