#!/usr/bin/env python3
"""A stdio provider for types and unknowns: a types_thing echoes its number and set of objects
back as they came (numbers read as their literal text and returned as strings, which oprov
reads as numbers exactly) and computes "out" from its input. Every request line is appended to
$TYPES_LOG when set."""
import json, os, sys

A = {"num": {"type": "number", "optional": True}, "input": {"type": "string", "required": True},
     "tags": {"type": ["set", ["object", {"k": "string", "n": "number"}]], "optional": True},
     "out": {"type": "string", "computed": True}}
SCHEMA = {"resources": {"types_thing": {"attributes": A}}}

for line in sys.stdin:
    if os.environ.get("TYPES_LOG"):
        with open(os.environ["TYPES_LOG"], "a") as f:
            f.write(line)
    req = json.loads(line, parse_float=str, parse_int=str)
    m, p = req["method"], req.get("params", {})
    res = {}
    if m == "initialize":
        res = {"protocol_version": "1", "schema": SCHEMA}
    elif m in ("create", "update"):
        c = p["config"]
        res = {"state": {"num": c["num"], "tags": c["tags"], "input": c["input"], "out": "out-of-" + c["input"]}}
    elif m == "read":
        res = {"state": p["state"]}
    print(json.dumps({"jsonrpc": "2.0", "id": int(req["id"]), "result": res}), flush=True)
