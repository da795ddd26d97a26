# historyd's build. `make run` and `make build` need only Go. `make gen` also
# regenerates the Python client's stubs with the pinned grpcio-tools (it builds
# the virtualenv when missing); `make test` installs and starts what the
# integration and conformance suites need (PostgreSQL from Debian, a Python
# virtualenv and node_modules with the real LangGraph packages).

SHELL := /bin/bash
GO ?= go
BUF := $(GO) tool -modfile=tools/go.mod buf
STATICCHECK := $(GO) tool -modfile=tools/go.mod staticcheck
BIN := bin/historyd
# buf breaking compares the API with this input; override to compare with
# another branch or tag.
BREAKING_AGAINST ?= .git\#branch=main
# Arguments for the go test runs of `make test` and `make test-unit`: every
# test runs under the race detector, and a package gets 45 minutes (the
# conformance suite writes threads with real LangGraph and is the slowest).
TEST_FLAGS ?= -count=1 -race -timeout 45m
# How long `make fuzz` runs each fuzz target, and how long `make test` does.
FUZZTIME ?= 60s
TEST_FUZZTIME ?= 5s
# Where `make run` keeps its demo checkpoints, and where it listens.
DEMO_DB ?= var/demo.db
HISTORYD_LISTEN ?= localhost:50051
PY_GEN := client/python/src/historyd_client/gen
TS_GEN := client/js/src/gen

.PHONY: all help build gen gen-go gen-python gen-ts check-gen lint breaking test test-unit test-deps test-python fuzz run clean bench bench-full soak

## all: the default: build.
all: build

## help: list the targets and what each does.
help:
	@awk '/^## / { sub(/^## /, ""); if (match($$0, /^[a-z-]+: /)) { name = substr($$0, 1, RLENGTH - 2); $$0 = substr($$0, RLENGTH + 1) } else name = ""; printf "  %-12s %s\n", name, $$0 }' $(firstword $(MAKEFILE_LIST))

# The version and commit `historyd version` and historyd_build_info report
# (see cmd/historyd/version.go), set at link time so that builds know them
# wherever the toolchain does not stamp version control information (a git
# worktree, -buildvcs=false). Empty outside a git checkout: the embedded
# build information is used then.
VERSION_LDFLAGS = -X main.version=$(shell git describe --tags --always --dirty 2>/dev/null) -X main.commit=$(shell git rev-parse HEAD 2>/dev/null)

## build: build bin/historyd.
build:
	$(GO) build -ldflags "$(VERSION_LDFLAGS)" -o $(BIN) ./cmd/historyd

## run: build, write the demo checkpoints when absent, and serve them in the
## foreground with reflection on.
run: build
	@[ -f $(DEMO_DB) ] || $(BIN) demo --out $(DEMO_DB)
	HISTORYD_LISTEN=$(HISTORYD_LISTEN) $(BIN) serve --dsn $(DEMO_DB)

## gen: regenerate gen/ from proto/ with the pinned buf and plugins, and the
## Python and TypeScript clients' stubs.
gen: gen-go gen-python gen-ts

## gen-go: regenerate gen/ (Go code and the descriptor set) from proto/.
gen-go:
	rm -rf gen/historyd
	$(BUF) generate
	$(BUF) build -o gen/descriptorset/historyd.binpb

## gen-python: regenerate the Python client's stubs with the pinned
## grpcio-tools.
gen-python:
	client/python/gen.sh

gen-ts:
	scripts/jsclient.sh
	rm -rf $(TS_GEN)
	$(BUF) generate --template buf.gen.ts.yaml

## check-gen: fail when the committed generated code differs from what
## `make gen` produces.
check-gen: gen
	@if [ -n "$$(git status --porcelain -- gen $(PY_GEN) $(TS_GEN))" ]; then \
		echo "gen/, $(PY_GEN) or $(TS_GEN) is out of date with proto/: run 'make gen' and commit the result" >&2; \
		git status --porcelain -- gen $(PY_GEN) $(TS_GEN) >&2; git --no-pager diff --stat -- gen $(PY_GEN) $(TS_GEN) >&2; exit 1; \
	fi

## lint: go vet, staticcheck, gofmt and buf lint.
lint:
	$(GO) vet ./...
	$(STATICCHECK) ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^gen/')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted" >&2; exit 1; fi
	$(BUF) lint

## breaking: buf breaking against $(BREAKING_AGAINST).
breaking:
	$(BUF) breaking --against '$(BREAKING_AGAINST)'

## test-unit: the tests that need nothing but Go.
test-unit:
	$(GO) test -short $(TEST_FLAGS) ./...

## test-python: the Python client's unit tests on Python 3.10, 3.11, 3.12
## and 3.13, each in a virtualenv of its own (scripts/pyclients.sh; no
## PostgreSQL needed).
test-python:
	scripts/pyclients.sh

## test-deps: install what the integration suites need.
test-deps:
	scripts/pyenv.sh
	scripts/nodeenv.sh
	scripts/pyclient.sh
	scripts/jsclient.sh

## test: everything: generated code in sync, lint, build, then unit,
## integration, conformance and fault-injection tests against a throwaway
## PostgreSQL (or the one HISTORYD_TEST_DSN names), then each fuzz target
## for $(TEST_FUZZTIME).
test: check-gen lint breaking build test-deps test-deploy test-python
	scripts/test.sh $(TEST_FLAGS) ./...
	scripts/fuzz.sh $(TEST_FUZZTIME)

## fuzz: run every fuzz target for $(FUZZTIME) each, one at a time
## (make fuzz FUZZTIME=10m for a long run).
fuzz:
	scripts/fuzz.sh $(FUZZTIME)

## bench: the benchmark's small mode (a few minutes) against a throwaway
## PostgreSQL; prints one table with the floors P1-P7 met or missed. See
## docs/benchmarks.md.
bench:
	scripts/bench.sh

## bench-full: the full mode: longer loads, more turns and reference calls,
## profiles of missed floors.
bench-full:
	scripts/bench.sh --full

## soak: SOAK_CALLS mixed calls (default 1,000,000) at SOAK_CONCURRENCY
## (default 64) over PostgreSQL behind PgBouncer in transaction mode, with a
## writer, retention, and PostgreSQL and PgBouncer restarted underneath;
## every answer checked against direct reads afterwards. Not part of `make
## test`; see docs/reliability.md.
soak:
	scripts/soak.sh

.PHONY: test-deploy image image-test

## test-deploy: render every Kubernetes overlay under deploy/ with kustomize's
## library and check the objects strictly against the Kubernetes API types,
## the invariants a working deployment needs, and historyd serve's own flags.
## deploy/ is a module of its own (no go.work), so that its Kubernetes
## dependencies stay out of historyd's.
test-deploy:
	cd deploy && GOWORK=off $(GO) vet ./... && GOWORK=off $(GO) test -race $(TEST_FLAGS) ./...

## image: the container image localhost/historyd:<git describe> and :latest,
## built with podman from a static binary compiled here (see Containerfile;
## IMAGE, IMAGE_VERSION, IMAGE_LICENSES… in scripts/image.sh).
image:
	scripts/image.sh

## image-test: build the image, then check its configuration, labels and
## contents and run it (scripts/image-test.sh). Needs podman, so it is not
## part of `make test`.
image-test: image
	scripts/image-test.sh $${IMAGE:-localhost/historyd}:latest

## clean: remove bin/, .cache/ (the virtualenv, the test cluster's env file) and var/.
clean:
	rm -rf bin .cache var
