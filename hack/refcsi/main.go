// Command refcsi answers, with vSphere CSI's own code
// (sigs.k8s.io/vsphere-csi-driver/v3, the newest version the Go module
// proxy serves here), what topology vSphere CSI gives a Node: the labels
// of its CSINodeTopology, or the error that fails it. It reads CSI's own
// csi-vsphere.conf with CSI's own reader, and answers one JSON query per
// line on stdin (a Node's system UUID) with one JSON answer per line. The
// differential harness (test/parity) runs it and this CCM's CSI view
// (topology explain --csi, labels.csiCompatible) on the same simulated
// VMs and compares.
//
//	refcsi -config csi-vsphere.conf < queries.jsonl > answers.jsonl
//	refcsi -config csi-vsphere.conf -check   # only read the config, as CSI does
//
// Each query runs what the syncer's CSINodeTopology reconciler runs for a
// vanilla cluster (reconcileForVanilla): the node manager finds the VM by
// the Node's UUID, then the unexported getNodeTopologyInfo, reached by its
// linker name, computes the labels with VirtualMachine.GetTopologyLabels.
// Only the reconciler's choice between those branches is transcribed
// (csinodetopology_controller.go:297-339 in v3.7.0). CSI's logs go to
// stderr.
//
// It is a module of its own, so CSI's dependencies never enter the CCM's.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
	_ "unsafe" // go:linkname

	"sigs.k8s.io/vsphere-csi-driver/v3/pkg/common/cns-lib/node"
	cnsvsphere "sigs.k8s.io/vsphere-csi-driver/v3/pkg/common/cns-lib/vsphere"
	cnsconfig "sigs.k8s.io/vsphere-csi-driver/v3/pkg/common/config"
	csinodetopologyv1alpha1 "sigs.k8s.io/vsphere-csi-driver/v3/pkg/internalapis/csinodetopology/v1alpha1"
	_ "sigs.k8s.io/vsphere-csi-driver/v3/pkg/syncer/cnsoperator/controller/csinodetopology" // getNodeTopologyInfo
)

// getNodeTopologyInfo is the syncer's own (csinodetopology_controller.go:488).
//
//go:linkname getNodeTopologyInfo sigs.k8s.io/vsphere-csi-driver/v3/pkg/syncer/cnsoperator/controller/csinodetopology.getNodeTopologyInfo
func getNodeTopologyInfo(ctx context.Context, nodeVM *cnsvsphere.VirtualMachine, cfg *cnsconfig.Config) ([]csinodetopologyv1alpha1.TopologyLabel, error)

// Query is one Node to ask about.
type Query struct {
	ID string `json:"id"`
	// UUID is the Node's system UUID, the CSINodeTopology's spec.nodeUUID.
	UUID string `json:"uuid"`
}

// Answer is what vSphere CSI computes: the CSINodeTopology's status
// labels, or the error message of its failed status.
type Answer struct {
	ID     string            `json:"id"`
	Labels map[string]string `json:"labels,omitempty"`
	Error  string            `json:"error,omitempty"`
}

func main() {
	configPath := flag.String("config", "", "vSphere CSI's csi-vsphere.conf")
	check := flag.Bool("check", false, "only read the config as vSphere CSI does, and exit")
	timeout := flag.Duration("timeout", 2*time.Minute, "per query")
	flag.Parse()
	ctx := context.Background()
	// Where CSI reads its config again when it connects, as its manifests
	// set it.
	os.Setenv(cnsconfig.EnvVSphereCSIConfig, *configPath)
	cfg, err := readConfig(ctx, *configPath)
	if err != nil {
		fmt.Fprintf(os.Stderr, "refcsi: vSphere CSI rejects %s: %v\n", *configPath, err)
		os.Exit(1)
	}
	if *check {
		return
	}
	if err := run(ctx, cfg, *timeout, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "refcsi:", err)
		os.Exit(1)
	}
}

// readConfig reads path with CSI's reader (which applies its environment
// overrides and validates).
func readConfig(ctx context.Context, path string) (*cnsconfig.Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return cnsconfig.ReadConfig(ctx, f)
}

func run(ctx context.Context, cfg *cnsconfig.Config, timeout time.Duration, in io.Reader, out io.Writer) error {
	// As the syncer starts: every vCenter of the config registered and
	// connected.
	vcs, err := cnsvsphere.GetVirtualCenterConfigs(ctx, cfg)
	if err != nil {
		return err
	}
	for _, vc := range vcs {
		if _, err := cnsvsphere.GetVirtualCenterInstanceForVCenterConfig(ctx, vc, false); err != nil {
			return fmt.Errorf("vCenter %s: %w", vc.Host, err)
		}
	}
	enc := json.NewEncoder(out)
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		var q Query
		if err := json.Unmarshal(sc.Bytes(), &q); err != nil {
			return fmt.Errorf("query %q: %w", sc.Text(), err)
		}
		if err := enc.Encode(answer(ctx, cfg, q, timeout)); err != nil {
			return err
		}
	}
	return sc.Err()
}

// answer is reconcileForVanilla's path for one CSINodeTopology
// (csinodetopology_controller.go:268-339).
func answer(ctx context.Context, cfg *cnsconfig.Config, q Query, timeout time.Duration) Answer {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	a := Answer{ID: q.ID}
	nodeVM, err := node.GetManager(ctx).GetNodeVMAndUpdateCache(ctx, q.UUID, nil)
	if err != nil {
		a.Error = fmt.Sprintf("failed to retrieve nodeVM %q using the node manager. Error: %+v", q.UUID, err)
		return a
	}
	switch {
	case cfg.Labels.TopologyCategories == "" && cfg.Labels.Zone == "" && cfg.Labels.Region == "":
		// !isTopologyEnabled: "Not a topology aware cluster."
		a.Labels = map[string]string{}
	case cfg.Labels.TopologyCategories != "" || (cfg.Labels.Zone != "" && cfg.Labels.Region != ""):
		labels, err := getNodeTopologyInfo(ctx, nodeVM, cfg)
		if err != nil {
			a.Error = fmt.Sprintf("failed to fetch topology information for the nodeVM %q. Error: %v", q.UUID, err)
			return a
		}
		a.Labels = map[string]string{}
		for _, l := range labels {
			a.Labels[l.Key] = l.Value
		}
	default:
		a.Error = "missing zone or region information in vSphere CSI config `Labels` section"
	}
	return a
}
