package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
)

// apiRequests sums the API server's apiserver_request_total by verb and
// resource ("PATCH nodes", "PATCH nodes/status"), read from its /metrics:
// the API server's own count of what it was asked, by everyone.
func apiRequests(ctx context.Context, kube kubernetes.Interface) (map[string]float64, error) {
	body, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	return parseAPIRequests(body), nil
}

// parseAPIRequests is apiRequests' parser of the text exposition format.
func parseAPIRequests(body []byte) map[string]float64 {
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	label := func(line, name string) string {
		_, v, ok := strings.Cut(line, ","+name+`="`)
		if !ok {
			_, v, ok = strings.Cut(line, "{"+name+`="`)
		}
		if !ok {
			return ""
		}
		v, _, _ = strings.Cut(v, `"`)
		return v
	}
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		key := label(line, "verb") + " " + label(line, "resource")
		if sub := label(line, "subresource"); sub != "" {
			key += "/" + sub
		}
		out[key] += v
	}
	return out
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
