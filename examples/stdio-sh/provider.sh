#!/bin/sh
# kv: key/value entries in a JSON file, as an oprov stdio provider (docs/stdio-protocol.md), in
# sh with jq: kv.jq answers each request; this loop keeps the database file. It runs in tofu's
# working directory; OPROV_PROVIDER_DIR is its own, where kv.jq is.
jq_program="${OPROV_PROVIDER_DIR:-.}/kv.jq"
path=""
while IFS= read -r line; do
  db='{}'
  if [ -n "$path" ] && [ -f "$path" ]; then db=$(cat "$path"); fi
  out=$(printf '%s\n' "$line" | jq -c --argjson db "$db" -f "$jq_program") || exit 1
  p=$(printf '%s\n' "$out" | jq -r '.path // empty')
  if [ -n "$p" ]; then path=$p; fi
  if printf '%s\n' "$out" | jq -e 'has("db")' >/dev/null; then
    printf '%s\n' "$out" | jq -c .db > "$path.tmp" && mv "$path.tmp" "$path"
  fi
  printf '%s\n' "$out" | jq -c .reply
done
