# offcard — build, test, benchmark, fuzz, lint.
GO      ?= go
FUZZTIME ?= 20s
PKGS    := ./...

-include testdata.mk

.PHONY: all build test bench fuzz lint staticcheck
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
