package main

import (
	"maps"
	"testing"
)

func TestParseAPIRequests(t *testing.T) {
	body := []byte(`# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="",verb="PATCH",version="v1"} 7
apiserver_request_total{code="409",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="",verb="PATCH",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="status",verb="PATCH",version="v1"} 3
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="events",scope="namespace",subresource="",verb="POST",version="v1"} 4
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="cluster",subresource="",verb="LIST",version="v1"} 9
# TYPE apiserver_request_total_other counter
apiserver_request_total_other{verb="PATCH",resource="nodes"} 100
`)
	got, err := parseAPIRequests(body)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"PATCH nodes": 9, "PATCH nodes/status": 3, "POST events": 4, "LIST nodes": 9}
	if !maps.Equal(got, want) {
		t.Fatalf("parseAPIRequests = %v, want %v", got, want)
	}
	writes := apiWrites(map[string]float64{"PATCH nodes": 5}, got)
	wantWrites := map[string]float64{"PATCH nodes": 4, "PATCH nodes/status": 3, "POST events": 4}
	if !maps.Equal(writes, wantWrites) {
		t.Fatalf("apiWrites = %v, want %v", writes, wantWrites)
	}
}
