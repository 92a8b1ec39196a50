# enipam — see README.md. Every tool these targets need is built into bin/
# by hack/tools.sh at pinned versions, so a fresh clone needs only Go.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
BIN := $(CURDIR)/bin
GO_TEST_FLAGS ?=
# The seeds make bench runs through the static-IP simulation: SIM_SEEDS
# from SIM_FROM (a run split across machines or processes gives each its
# own range).
SIM_FROM ?= 1
SIM_SEEDS ?= 100000
# Static binaries everywhere: the images need them (FROM scratch), and one
# setting for tests, builds and images lets them share the build cache.
export CGO_ENABLED := 0
# The version every binary reports (--version) and the images carry: the
# chart's appVersion, as hack/images.sh reads it.
VERSION ?= $(shell sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$$/\1/p' charts/enipam/Chart.yaml)

.PHONY: all build demo test bench lint chart-lint generate tools images clean

all: build

## tools: build the control plane (kube-apiserver, etcd, kube-scheduler, kubectl), helm, controller-gen, staticcheck, promtool into bin/ (cached)
tools:
	@hack/tools.sh

## build: every enipam binary into bin/
build:
	go build -trimpath -ldflags "-X github.com/enipam/enipam/internal/version.Version=$(VERSION)" -o $(BIN)/ ./...

## images: one OCI archive per binary in _out/images/, an image index for linux/amd64 and linux/arm64 (FROM scratch, offline, version-stamped), with podman, buildah or docker
images:
	@hack/images.sh

## demo: enipam at work on this machine: kube-apiserver + etcd, an emulated EC2 VPC, the real enipam-operator, simulated cilium-agents with pods; prints the filled pools, runs until Ctrl-C (DEMO_ONCE=1: exits after printing)
demo: tools
	@hack/demo.sh

## test: every test, against a real kube-apiserver + etcd; the kill campaign and fault scenarios (test/chaos) alone after the rest, as they measure convergence; then a short fuzz of ec2sim's request parser
test: tools
	go test -count=1 -timeout 30m $(GO_TEST_FLAGS) $$(go list ./... | grep -v '/test/chaos$$')
	go test -count=1 -timeout 30m $(GO_TEST_FLAGS) ./test/chaos/
	go test -run '^$$' -fuzz '^FuzzQuery$$' -fuzztime 10s ./test/ec2sim/

## bench: scale-up, the dual-stack scale-up (IPv6 EC2 calls per node, then none while the /80 lasts), churn, steady (5000 and 10 000 idle nodes), placement, static-moves, pools and the apiserver outage with the real binaries (BENCH_QUICK=1: small runs), a kill campaign of 200 nodes and 30 SIGKILLs, then the node agent's Go benchmarks (among them the rules per node at 110 pods, with and without prefixes) and ec2sim's, then 100 000 seeds of the static-IP simulation (test/staticsim, on every core: steps, interleavings, binds, moves, restarts and kills covered; SIM_FROM and SIM_SEEDS choose the range) and enipam max-pods held to the operator under every first-interface-index and prefix combination; reports in _out/bench
bench: tools
	go run ./test/bench/cmd/enipam-bench -out _out/bench
	go test -count=1 -timeout 60m -v ./test/chaos/ -args -chaos.nodes=200 -chaos.kills=30 -chaos.lease-faults
	go test -run '^$$' -bench . -benchtime 20x ./nodeagent/kernel/
	go test -run '^$$' -bench . -benchmem ./test/ec2sim/
	go test -count=1 -timeout 180m -run '^TestSeeds$$' -v ./test/staticsim/ -args -from=$(SIM_FROM) -seeds=$(SIM_SEEDS)
	go test -count=1 -timeout 120m -run '^TestMaxPodsAgreesWithTheOperator$$' ./operator/cmd/enipam/ -args -maxpods.all-configs

## lint: gofmt, go vet, staticcheck, helm lint
lint: tools chart-lint
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	go vet ./...
	$(BIN)/staticcheck ./...

## chart-lint: helm lint of charts/enipam with each values file of its ci/ folder (clusterName is required)
chart-lint: tools
	@for f in charts/enipam/ci/*-values.yaml; do $(BIN)/helm lint --strict charts/enipam -f "$$f"; done

## generate: deepcopy functions and CRD manifests from api/, copied into the chart
generate: tools
	$(BIN)/controller-gen object paths=./api/...
	$(BIN)/controller-gen crd paths=./api/... output:crd:dir=crds
	rm -f charts/enipam/crds/*.yaml
	cp crds/*.yaml charts/enipam/crds/

clean:
	rm -rf $(BIN)
