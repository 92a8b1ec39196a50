# enipam — see README.md. Every tool these targets need is built into bin/
# by hack/tools.sh at pinned versions, so a fresh clone needs only Go.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
BIN := $(CURDIR)/bin
GO_TEST_FLAGS ?=

.PHONY: all build test lint generate tools clean

all: build

## tools: build the control plane (kube-apiserver, etcd, kube-scheduler, kubectl), helm, controller-gen, staticcheck into bin/ (cached)
tools:
	@hack/tools.sh

## build: every enipam binary into bin/
build:
	go build -trimpath -o $(BIN)/ ./...

## test: every test, against a real kube-apiserver + etcd
test: tools
	go test -count=1 -timeout 30m $(GO_TEST_FLAGS) ./...

## lint: gofmt, go vet, staticcheck
lint: tools
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	go vet ./...
	$(BIN)/staticcheck ./...

## generate: deepcopy functions and CRD manifests from api/
generate: tools
	$(BIN)/controller-gen object paths=./api/...
	$(BIN)/controller-gen crd paths=./api/... output:crd:dir=crds

clean:
	rm -rf $(BIN)
