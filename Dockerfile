# The alternative to `make image` for builders with a container daemon and
# registry access (it pulls golang and distroless): static, non-root.
#   docker build --build-arg VERSION=$(hack/version.sh version) --build-arg COMMIT=$(hack/version.sh commit) \
#     --build-arg BUILD_DATE=$(hack/version.sh date) -t vsphere-cloud-controller-manager .
# `make image` builds an equivalent OCI archive without either (docs/operations.md).
FROM golang:1.26 AS build
ARG VERSION=v0.0.0-unknown
ARG COMMIT=unknown
ARG BUILD_DATE=1970-01-01T00:00:00Z
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY pkg/ pkg/
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w \
      -X k8s.io/component-base/version.gitVersion=${VERSION} -X k8s.io/component-base/version.gitCommit=${COMMIT} \
      -X k8s.io/component-base/version.buildDate=${BUILD_DATE} \
      -X k8s.io/component-base/version/verflag.programName=vsphere-cloud-controller-manager" \
    -o /out/vsphere-cloud-controller-manager ./cmd/vsphere-cloud-controller-manager

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/vsphere-cloud-controller-manager /usr/local/bin/vsphere-cloud-controller-manager
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/vsphere-cloud-controller-manager"]
