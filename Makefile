# vsphere-cloud-controller-manager
SHELL := /bin/bash
BIN := bin/vsphere-cloud-controller-manager
GO ?= go
# A count, not a duration: with a duration, Go 1.26's fuzz coordinator can
# fail a target with "context deadline exceeded" at the deadline on a busy
# machine (golang/go#75804, fixed in Go 1.27). FUZZTIME=1m still works.
FUZZTIME ?= 50000x
# Every fuzz target, as package:Target.
FUZZ_TARGETS := ./pkg/config:FuzzParseYAML ./pkg/config:FuzzParseINI ./pkg/config:FuzzNoSecretEcho ./pkg/credentials:FuzzParseData ./pkg/providerid:FuzzUUID ./pkg/labelvalue:FuzzOf ./pkg/guestinfo:FuzzStaticOrder ./pkg/controllers/servingcsr:FuzzInspect ./pkg/controllers/nodetopology:FuzzAddressesAsTheFramework ./pkg/inventory:FuzzParseUUID ./pkg/memlimit:FuzzParseCgroupLimit ./pkg/collectorxml:FuzzDecode

.PHONY: all build image test unit parity e2e soak control-plane demo fuzz rules bench lint fmt clean

all: lint build test

# Version stamping (hack/version.sh): --version and the kubernetes_build_info
# metric say which commit runs. Override VERSION to stamp a release.
VERSION ?= $(shell bash hack/version.sh version)
COMMIT ?= $(shell bash hack/version.sh commit)
TREE_STATE ?= $(shell bash hack/version.sh tree)
BUILD_DATE ?= $(shell bash hack/version.sh date)
VERSION_PKG := k8s.io/component-base/version
LDFLAGS := -s -w -X $(VERSION_PKG).gitVersion=$(VERSION) -X $(VERSION_PKG).gitCommit=$(COMMIT) \
	-X $(VERSION_PKG).gitTreeState=$(TREE_STATE) -X $(VERSION_PKG).buildDate=$(BUILD_DATE) \
	-X $(VERSION_PKG)/verflag.programName=vsphere-cloud-controller-manager
IMAGE ?= bin/vsphere-cloud-controller-manager.oci.tar
IMAGE_REF ?= vsphere-cloud-controller-manager:$(VERSION)
SOURCE ?= https://github.com/vsphere-ccm/vsphere-cloud-controller-manager

## build: compile the CCM binary into bin/, stamped with the version from git
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/vsphere-cloud-controller-manager

## image: an OCI image archive (bin/vsphere-cloud-controller-manager.oci.tar) without a container
## daemon or a base image: the static binary, a CA bundle and a non-root user; reproducible
image: build
	$(GO) run ./hack/image -binary $(BIN) -out $(IMAGE) -ref $(IMAGE_REF) -version $(VERSION) \
		-revision $(COMMIT) -created $(BUILD_DATE) -source $(SOURCE)

## test: unit and integration tests with the race detector, short fuzz runs, the alert rules' tests, the end-to-end suite
## and a short fault soak
test: unit fuzz rules parity e2e soak

unit:
	$(GO) test -race -count=1 ./...

## parity: the reference CCM's own node code (hack/refnode) and vSphere CSI's own node-topology code
## (hack/refcsi) against this CCM, on the same simulated VMs
## and configs; fails on any difference docs/migration.md does not list
parity:
	$(GO) test -tags parity -count=1 -timeout 20m -v -run TestParity ./test/parity

## control-plane: build etcd and kube-apiserver from the Go module proxy (cached in .cache/tools)
control-plane:
	bash hack/build-control-plane.sh

## e2e: the real binary against a real kube-apiserver + etcd and simulated vCenters
e2e: control-plane
	$(GO) test -tags e2e -count=1 -timeout 30m -v ./test/e2e ./test/controlplane

## soak: the real binary (three replicas, leader election, one never killed), a real API server and three simulated
## vCenters under a seeded random schedule of faults, for SOAK (default 3m); SEED=n replays a run
SOAK ?= 3m
SEED ?= 0
soak: build control-plane
	$(GO) run ./test/soak -ccm $(BIN) -duration $(SOAK) -seed $(SEED)

## demo: simulated vCenters + a real API server + the CCM; prints the nodes and topology explain
## (DEMO_ONESHOT=1 exits after printing, otherwise runs until Ctrl-C)
demo: build control-plane
	$(GO) run ./test/demo -ccm $(BIN)

## rules: the alert rules' unit tests with promtool (deploy/monitoring/alerts.test.yaml);
## promtool comes from Debian's prometheus package or the module proxy (hack/build-promtool.sh)
rules:
	$$(bash hack/build-promtool.sh) test rules deploy/monitoring/alerts.test.yaml

## fuzz: run every fuzz target for FUZZTIME (default 50,000 inputs each; a duration such as 1m works too),
## the fast decoder's (FuzzDecode, compared with govmomi's decoder) for FUZZTIME_DECODE (default 500,000: about 35 s)
FUZZTIME_DECODE ?= 500000x
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; time=$(FUZZTIME); \
		if [ "$$name" = FuzzDecode ]; then time=$(FUZZTIME_DECODE); fi; \
		echo "fuzz $$pkg $$name for $$time"; \
		$(GO) test $$pkg -run '^$$' -fuzz "^$$name$$" -fuzztime $$time; \
	done

## bench: the micro benchmarks (simulated vCenters, BENCH_VMS VMs) and the scale scenario (N Nodes through
## the real controllers and API server), in minutes. Scenarios by name run alone:
##   make bench SCENARIOS=hundredk       5,000 Nodes among 100,000 VMs, three rounds (about an hour)
##   make bench SCENARIOS=day            the steady state beside the reference (DAY_DURATION each, 30m; 24h for a day)
##   make bench SCENARIOS=site,failover,drift,bigvc,firstlookup,csr
## Results: docs/performance.md
BENCHTIME ?= 1s
BENCH_VMS ?= 2000
N ?= 1000
SCENARIOS ?= scale
DAY_DURATION ?= 30m
BENCH_ARGS ?=
bench: build control-plane
	$(GO) build -o bin/zerocost ./test/bench/zerocost
	@if [ "$(origin SCENARIOS)" = "file" ]; then \
		echo "micro benchmarks ($(BENCHTIME) each, BENCH_VMS=$(BENCH_VMS))"; \
		BENCH_VMS=$(BENCH_VMS) $(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) -timeout 30m ./pkg/...; \
	fi
	$(GO) run ./test/bench -scenarios $(SCENARIOS) -n $(N) -day-duration $(DAY_DURATION) -ccm $(BIN) -zerocost bin/zerocost $(BENCH_ARGS)

## lint: no tracked build outputs or big files, go vet and a gofmt check
lint:
	bash hack/check-tracked.sh
	$(GO) vet ./...
	$(GO) vet -tags e2e ./test/e2e
	$(GO) vet -tags parity ./test/parity
	cd hack/refnode && $(GO) vet .
	cd hack/refcsi && $(GO) vet .
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin
