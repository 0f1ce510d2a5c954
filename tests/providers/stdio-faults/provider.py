#!/usr/bin/env python3
"""A stdio provider that fails on request: a faults_thing whose mode is "exit" exits during its
create, "garbage" writes a non-protocol line, "hang" never answers, anything else works. With
FAULTS_BAD_SCHEMA set in the environment its schema is invalid."""
import json, os, sys, time

SCHEMA = {"resources": {"faults_thing": {"attributes": {
    "mode": {"type": "string", "required": True}, "id": {"type": "string", "computed": True}}}}}
if os.environ.get("FAULTS_BAD_SCHEMA"):
    SCHEMA["resources"]["faults_thing"]["attributes"]["mode"] = {"type": "strnig", "required": True}

for line in sys.stdin:
    req = json.loads(line)
    m, p = req["method"], req.get("params", {})
    res = {}
    if m == "initialize":
        res = {"protocol_version": "1", "schema": SCHEMA}
    elif m == "create":
        mode = p["config"]["mode"]
        print("creating a thing in mode " + mode, file=sys.stderr, flush=True)
        if mode == "exit":
            sys.exit(3)
        if mode == "garbage":
            print("this is not JSON-RPC", flush=True)
        if mode == "hang":
            time.sleep(3600)
        res = {"state": {"id": "t-" + mode}}
    elif m == "read":
        res = {"state": p["state"]}
    print(json.dumps({"jsonrpc": "2.0", "id": req["id"], "result": res}), flush=True)
