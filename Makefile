# offcard — build, test, benchmark, fuzz, lint.
GO      ?= go
FUZZTIME ?= 20s
PKGS    := ./...

-include testdata.mk

.PHONY: all build test bench fuzz lint staticcheck mutants mutation-score loopback ttnn-check
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

# Compile-check the ttnn shim (tthw/ttnn) against tt-metal's headers laid
# out in TTNN_HEADERS (its cxxflags file lists the include paths); with
# clang++ too when it is installed. See tthw/ttnn/README.md.
TTNN_HEADERS ?=
ttnn-check:
	@test -n "$(TTNN_HEADERS)" -a -f "$(TTNN_HEADERS)/cxxflags" || { echo "ttnn-check: set TTNN_HEADERS to a directory with a cxxflags file (tthw/ttnn/README.md)"; exit 2; }
	g++ -std=c++20 -fsyntax-only -w -Itthw/include $$(cat $(TTNN_HEADERS)/cxxflags) tthw/ttnn/offcard_tt_ttnn.cpp
	@if command -v clang++ >/dev/null; then echo clang++ -std=c++20 -fsyntax-only; clang++ -std=c++20 -fsyntax-only -w -Itthw/include $$(cat $(TTNN_HEADERS)/cxxflags) tthw/ttnn/offcard_tt_ttnn.cpp; fi

build:
	$(GO) build $(PKGS)

# The README's test command. testdata fetches the Qwen3 tokenizer.json
# (hash-checked, git-ignored) that the tokenizer tests need.
test: build testdata loopback
	$(GO) vet $(PKGS)
	OFFCARD_LOOPBACK=$(LOOPBACK) $(GO) test -count=1 -timeout 30m $(PKGS)

bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

# Each fuzz target for a bounded time (FUZZTIME).
fuzz:
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$t"; \
	    $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

STATICCHECK := $(shell $(GO) env GOPATH)/bin/staticcheck
$(STATICCHECK):
	$(GO) install honnef.co/go/tools/cmd/staticcheck@v0.8.2

lint: $(STATICCHECK)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt: $$out"; exit 1; fi
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
