# Static build, distroless base, non-root.
#   docker build -t vsphere-cloud-controller-manager .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY pkg/ pkg/
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/vsphere-cloud-controller-manager ./cmd/vsphere-cloud-controller-manager

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/vsphere-cloud-controller-manager /usr/local/bin/vsphere-cloud-controller-manager
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/vsphere-cloud-controller-manager"]
