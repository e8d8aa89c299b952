package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"k8s.io/client-go/kubernetes"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/ccmproc"
)

// apiRequests sums the API server's apiserver_request_total by verb and
// resource ("PATCH nodes", "PATCH nodes/status"), read from its /metrics:
// the API server's own count of what it was asked, by everyone.
func apiRequests(ctx context.Context, kube kubernetes.Interface) (map[string]float64, error) {
	body, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	return parseAPIRequests(body)
}

// parseAPIRequests is apiRequests' reader of the text exposition.
func parseAPIRequests(body []byte) (map[string]float64, error) {
	return ccmproc.SumSeries(bytes.NewReader(body), "apiserver_request_total", func(l map[string]string) string {
		k := l["verb"] + " " + l["resource"]
		if l["subresource"] != "" {
			k += "/" + l["subresource"]
		}
		return k
	})
}

// apiWrites returns the writes among requests (after minus before), by
// verb and resource.
func apiWrites(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		verb, _, _ := strings.Cut(k, " ")
		switch verb {
		case "POST", "PUT", "PATCH", "DELETE", "APPLY":
			if d := v - before[k]; d > 0 {
				out[k] = d
			}
		}
	}
	return out
}
