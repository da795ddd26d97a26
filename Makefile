# historyd's build. Everything needs only Go, except `make test`, which also
# installs and starts what the integration and conformance suites need
# (PostgreSQL from Debian, a Python virtualenv and node_modules with the real
# LangGraph packages).

SHELL := /bin/bash
GO ?= go
BUF := $(GO) tool -modfile=tools/go.mod buf
BIN := bin/historyd
# buf breaking compares the API with this input; override to compare with
# another branch or tag.
BREAKING_AGAINST ?= .git\#branch=main
# Arguments for the go test run inside `make test`.
TEST_FLAGS ?= -count=1

.PHONY: all build gen check-gen lint breaking test test-unit test-deps run clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/historyd

## gen: regenerate gen/ from proto/ with the pinned buf and plugins.
gen:
	rm -rf gen/historyd
	$(BUF) generate

## check-gen: fail when the committed generated code differs from what
## `make gen` produces.
check-gen: gen
	@if [ -n "$$(git status --porcelain -- gen)" ]; then \
		echo "gen/ is out of date with proto/: run 'make gen' and commit the result" >&2; \
		git status --porcelain -- gen >&2; git --no-pager diff --stat -- gen >&2; exit 1; \
	fi

## lint: go vet, gofmt and buf lint.
lint:
	$(GO) vet ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^gen/')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted" >&2; exit 1; fi
	$(BUF) lint

## breaking: buf breaking against $(BREAKING_AGAINST).
breaking:
	$(BUF) breaking --against '$(BREAKING_AGAINST)'

## test-unit: the tests that need nothing but Go.
test-unit:
	$(GO) test -short $(TEST_FLAGS) ./...

## test-deps: install what the integration suites need.
test-deps:
	scripts/pyenv.sh
	scripts/nodeenv.sh

## test: everything: generated code in sync, lint, build, then unit,
## integration and conformance tests against a throwaway PostgreSQL (or the
## one HISTORYD_TEST_DSN names).
test: check-gen lint breaking build test-deps
	scripts/test.sh $(TEST_FLAGS) ./...

clean:
	rm -rf bin .cache var
