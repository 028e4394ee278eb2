# offcard — build, test, benchmark, fuzz, lint.
GO      ?= go
FUZZTIME ?= 20s
PKGS    := ./...

-include testdata.mk

.PHONY: all build test bench fuzz lint staticcheck mutants mutation-score crosscheck loopback ttnn-check ttnn-table ttnn-cites cpp-engine
all: build loopback

# The C loopback of the device ABI (tthw/loopback, tthw/include/offcard_tt.h),
# built with cc into the git-ignored build/ folder. Tests find it through
# OFFCARD_LOOPBACK (set below for make test; without it they build their
# own copy with cc).
CC       ?= cc
LOOPBACK := $(CURDIR)/build/liboffcard_tt_loopback.so
LOOPBACK_SRC := $(wildcard tthw/loopback/*.c tthw/loopback/*.h) tthw/include/offcard_tt.h
loopback: $(LOOPBACK)
$(LOOPBACK): $(LOOPBACK_SRC)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 -Wall -Wextra -Werror -fPIC -shared -Itthw/include -o $@ tthw/loopback/loopback.c tthw/loopback/ops.c -lm

# The C++ reference engine (examples/cpp-engine): C++17, the standard
# library and nlohmann/json (Debian: nlohmann-json3-dev), built with g++
# into build/cpp-engine. make test builds it when g++ is present and runs a
# short campaign against it (OFFCARD_CPP_ENGINE; cmd/offcard's
# TestCppEngine).
ENGINE_CXX ?= g++
CPP_ENGINE := $(CURDIR)/build/cpp-engine
CPP_ENGINE_SRC := $(wildcard examples/cpp-engine/*.cpp examples/cpp-engine/*.hpp)
HAVE_ENGINE_CXX := $(shell command -v $(ENGINE_CXX) 2>/dev/null)
cpp-engine: $(CPP_ENGINE)
$(CPP_ENGINE): $(CPP_ENGINE_SRC)
	@mkdir -p $(dir $@)
	@echo '#include <nlohmann/json.hpp>' | $(ENGINE_CXX) -std=c++17 -fsyntax-only -x c++ - 2>/dev/null || { echo "cpp-engine: nlohmann/json.hpp not found (Debian: apt-get install nlohmann-json3-dev)" >&2; exit 1; }
	$(ENGINE_CXX) -std=c++17 -O2 -Wall -Wextra -Werror -ffp-contract=off -o $@ $(filter %.cpp,$(CPP_ENGINE_SRC))

# Compile-check the ttnn shim (tthw/ttnn) against tt-metal's headers laid
# out in TTNN_HEADERS (its cxxflags file lists the include paths); with
# clang++ too when it is installed. See tthw/ttnn/README.md.
TTNN_HEADERS ?=
ttnn-check:
	@test -n "$(TTNN_HEADERS)" -a -f "$(TTNN_HEADERS)/cxxflags" || { echo "ttnn-check: set TTNN_HEADERS to a directory with a cxxflags file (tthw/ttnn/README.md)"; exit 2; }
	g++ -std=c++20 -fsyntax-only -w -Itthw/include $$(cat $(TTNN_HEADERS)/cxxflags) tthw/ttnn/offcard_tt_ttnn.cpp
	@if command -v clang++ >/dev/null; then echo clang++ -std=c++20 -fsyntax-only; clang++ -std=c++20 -fsyntax-only -w -Itthw/include $$(cat $(TTNN_HEADERS)/cxxflags) tthw/ttnn/offcard_tt_ttnn.cpp; fi

# The drift check of the checks table (tt/checks.tsv): re-reads, in the
# tt-metal git directory TTMETAL at COMMIT (default: the table's pin), the
# validate functions the table lists and prints every entry whose text,
# condition or line changed, and the checks gone or new (exit 1 when any).
# No network: point TTMETAL at a local clone or mirror.
TTMETAL ?=
COMMIT  ?=
ttnn-table:
	@test -n "$(TTMETAL)" || { echo "ttnn-table: set TTMETAL to a tt-metal git directory (TTMETAL=path/to/tt-metal/.git)"; exit 2; }
	$(GO) run ./cmd/ttnn-table -git "$(TTMETAL)" $(if $(COMMIT),-commit "$(COMMIT)")

# The citations check: every tt-metal path:line that sim, tt, tthw, qwen3,
# conform and the README cite must name one file of TTMETAL at COMMIT
# (default: the checks table's pin) and lie inside it; prints each bad one
# (exit 1 when any). No network.
ttnn-cites:
	@test -n "$(TTMETAL)" || { echo "ttnn-cites: set TTMETAL to a tt-metal git directory (TTMETAL=path/to/tt-metal/.git)"; exit 2; }
	$(GO) run ./cmd/ttnn-table -git "$(TTMETAL)" $(if $(COMMIT),-commit "$(COMMIT)") -cites sim,tt,tthw,qwen3,conform,README.md

build:
	$(GO) build $(PKGS)

# The README's test command. testdata fetches the Qwen3 tokenizer.json
# (hash-checked, git-ignored) that the tokenizer tests need.
test: build testdata loopback $(if $(HAVE_ENGINE_CXX),cpp-engine)
	$(GO) vet $(PKGS)
	OFFCARD_LOOPBACK=$(LOOPBACK) $(if $(HAVE_ENGINE_CXX),OFFCARD_CPP_ENGINE=$(CPP_ENGINE)) $(GO) test -count=1 -timeout 30m $(PKGS)

bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

# Each fuzz target for a bounded time (FUZZTIME), after fetching the test
# data the targets need (CI=1: a target whose data is missing fails
# instead of skipping). A target that skips anyway fails the run: a skip
# is not a pass.
fuzz: testdata
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$t"; \
	    out=$$(CI=1 $(GO) test -v -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg 2>&1) || { echo "$$out"; exit 1; }; \
	    echo "$$out" | grep -v '^fuzz: elapsed' | tail -n 3; \
	    if echo "$$out" | grep -q -- '--- SKIP'; then echo "fuzz: $$t was skipped, not fuzzed" >&2; exit 1; fi; \
	  done; \
	done

STATICCHECK := $(shell $(GO) env GOPATH)/bin/staticcheck
$(STATICCHECK):
	$(GO) install honnef.co/go/tools/cmd/staticcheck@v0.8.2

lint: $(STATICCHECK)
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt: $$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(STATICCHECK) $(PKGS)

# The mutant catalog (proptest/mutants): each mutant is built with
# go build -overlay and must be killed by offcard check. MUTANT_ARGS, e.g.
# "--only pt-one-column --cases 10". Also runs the seed-bug red-step test.
MUTANT_ARGS ?=
mutants: build
	$(GO) test -count=1 -run '^TestSeedMutantsRedSteps$$' ./proptest/mutants
	$(GO) run ./cmd/offcard mutants $(MUTANT_ARGS)

# gremlins' operator mutation score of kvpage and the engine (qwen3's
# engine.go and engine_step.go): reported, not gated. -short skips the
# tests that build mutants themselves; a large timeout coefficient because
# gremlins times the tests without their compile. No --test-cpu: gremlins
# v0.6.0 passes it to go test as the single argument "-cpu N", which go
# test takes for a package path, so every test run failed to set up (exit
# 1) and every mutant counted as killed (the old bogus 100%). -count=1:
# a cached coverage run (~0.3 s) made gremlins' per-mutant timeout shorter
# than a test binary's compile, so mutants "timed out".
# GREMLINS_ENGINE_EXCLUDE adds exclusions, e.g. "-E '^engine\.go'" to
# score engine_step.go alone (~120 of the ~220 mutants). Writes
# gremlins-*.json under GREMLINS_OUT.
GREMLINS := $(shell $(GO) env GOPATH)/bin/gremlins
$(GREMLINS):
	$(GO) install github.com/go-gremlins/gremlins/cmd/gremlins@v0.6.0

GREMLINS_OUT ?= /tmp/offcard-gremlins
GREMLINS_ENGINE_EXCLUDE ?=
mutation-score: $(GREMLINS)
	mkdir -p $(GREMLINS_OUT)
	-GOFLAGS='-short -count=1' $(GREMLINS) unleash --workers 1 --timeout-coefficient 30 -o $(GREMLINS_OUT)/gremlins-kvpage.json ./kvpage
	-GOFLAGS='-short -count=1' $(GREMLINS) unleash --workers 1 --timeout-coefficient 10 \
	  -E '^(tokenizer|safetensors)/' -E '^(config|load|synth|weights|decoder)' $(GREMLINS_ENGINE_EXCLUDE) \
	  -o $(GREMLINS_OUT)/gremlins-engine.json ./qwen3

# The PyTorch cross-check of the ref oracle (ref/crosscheck_test.go):
# regenerates the committed fixtures under ref/testdata/crosscheck with
# hf_eager.py (Hugging Face's eager Qwen3 forward in bf16 on PyTorch; Debian:
# apt-get install python3-torch, which installs into /usr/bin/python3) from
# the synthetic weights the export helper writes into CROSSCHECK_DIR, then
# runs the comparison. The fixtures are small (top-8 logits per position).
PYTHON         ?= /usr/bin/python3
CROSSCHECK_DIR ?= /tmp/offcard-crosscheck
CROSSCHECK     := ref/testdata/crosscheck
crosscheck:
	@$(PYTHON) -c 'import torch' || { echo "crosscheck: $(PYTHON) has no torch (apt-get install python3-torch, or PYTHON=...)" >&2; exit 1; }
	$(GO) run ./$(CROSSCHECK)/export --preset tiny --seed 1 --out $(CROSSCHECK_DIR)/tiny
	$(PYTHON) $(CROSSCHECK)/hf_eager.py $(CROSSCHECK_DIR)/tiny $(CROSSCHECK)/tiny-seed1.json --name tiny --prompt 1,2,3,4,5 --steps 11
	$(GO) run ./$(CROSSCHECK)/export --preset qwen3-0.6b --layers 2 --seed 1 --out $(CROSSCHECK_DIR)/qwen3-0.6b-2layers
	$(PYTHON) $(CROSSCHECK)/hf_eager.py $(CROSSCHECK_DIR)/qwen3-0.6b-2layers $(CROSSCHECK)/qwen3-0.6b-2layers-seed1.json --name qwen3-0.6b-2layers --prompt 1,2,3,4,5 --steps 7
	$(GO) test -count=1 -run '^TestCrossCheckPyTorch$$' -v ./ref
