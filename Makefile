# offcard — build, test, benchmark, fuzz, lint.
GO      ?= go
FUZZTIME ?= 20s
PKGS    := ./...

-include testdata.mk

.PHONY: all build test bench fuzz lint staticcheck mutants mutation-score
all: build

build:
	$(GO) build $(PKGS)

# The README's test command. testdata fetches the Qwen3 tokenizer.json
# (hash-checked, git-ignored) that the tokenizer tests need.
test: build testdata
	$(GO) vet $(PKGS)
	$(GO) test -count=1 -timeout 30m $(PKGS)

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

# gremlins' operator mutation score of kvpage and the engine: reported,
# not gated. Writes gremlins-*.json in the working directory.
GREMLINS := $(shell $(GO) env GOPATH)/bin/gremlins
$(GREMLINS):
	$(GO) install github.com/go-gremlins/gremlins/cmd/gremlins@v0.6.0

mutation-score: $(GREMLINS)
	-$(GREMLINS) unleash --workers 1 -o gremlins-kvpage.json ./kvpage
	-$(GREMLINS) unleash --workers 1 --timeout-coefficient 3 -E '^qwen3/(config|load|synth|weights|decoder)' -o gremlins-engine.json ./qwen3
