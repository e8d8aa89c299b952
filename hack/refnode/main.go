// Command refnode answers, with the reference CCM's own code
// (k8s.io/cloud-provider-vsphere, the version hack/refverdict reads configs
// with), what a Node gets: InstanceExists, InstanceShutdown and
// InstanceMetadata (providerID, instance type, ordered addresses, zone,
// region), for Nodes given on stdin, one JSON object per line, against the
// vCenters of the cloud-config it is started with. It writes one JSON
// answer per line. The differential harness (test/parity) runs it and this
// CCM on the same simulated VMs and configs and compares.
//
//	refnode -config vsphere.conf < queries.jsonl > answers.jsonl
//
// The reference is built as its binary builds it: its provider registered
// by importing its package, read with its config loader, initialized with a
// Kubernetes client (a fake one here: the reference only reads Secrets and
// watches Nodes with it). Each query first discovers the Node's VM by its
// systemUUID, as the reference's RegisterNode does when a Node is added,
// then asks what the framework's controllers ask.
//
// It is a module of its own, so the reference's dependencies never enter
// the CCM's.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"go/format"
	"io"
	"os"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	restclient "k8s.io/client-go/rest"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider-vsphere/pkg/cloudprovider/vsphere" // registers "vsphere", as the reference's main does
	"k8s.io/klog/v2"
)

// Query is one Node to ask about.
type Query struct {
	ID   string  `json:"id"`
	Node v1.Node `json:"node"`
	// Register discovers the Node's VM by systemUUID first, as the
	// reference does when the Node is added (its informer's RegisterNode).
	Register bool `json:"register"`
	// SkipNodeDeletion sets SKIP_NODE_DELETION for this query.
	SkipNodeDeletion bool `json:"skipNodeDeletion,omitempty"`
}

// Answer is what the reference answers.
type Answer struct {
	ID       string    `json:"id"`
	Exists   Verdict   `json:"exists"`
	Shutdown Verdict   `json:"shutdown"`
	Metadata *Metadata `json:"metadata,omitempty"`
	// MetadataError is InstanceMetadata's error.
	MetadataError string `json:"metadataError,omitempty"`
}

// Verdict is a boolean answer or an error.
type Verdict struct {
	Value bool   `json:"value"`
	Error string `json:"error,omitempty"`
}

// Metadata is InstanceMetadata's answer.
type Metadata struct {
	ProviderID   string            `json:"providerID"`
	InstanceType string            `json:"instanceType"`
	Addresses    []v1.NodeAddress  `json:"addresses"`
	Zone         string            `json:"zone,omitempty"`
	Region       string            `json:"region,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
}

func main() {
	configPath := flag.String("config", "", "the cloud-config (YAML or INI)")
	timeout := flag.Duration("timeout", 2*time.Minute, "per query")
	guestOS := flag.Bool("guest-os-table", false, "print the reference's guestId -> short OS table (JSON) and exit")
	guestOSGo := flag.Bool("guest-os-go", false, "print the table as the CCM's Go source (pkg/provider/guestos.go) and exit")
	creds := flag.Bool("credentials", false, "read credential queries (CredentialQuery) instead of Nodes: the reference's credential manager and vCenter connection")
	flag.Parse()
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
	if *guestOSGo {
		var b bytes.Buffer
		writeGuestOSGo(&b)
		src, err := format.Source(b.Bytes())
		if err != nil {
			fmt.Fprintln(os.Stderr, "refnode:", err)
			os.Exit(1)
		}
		os.Stdout.Write(src)
		return
	}
	if *guestOS {
		if err := json.NewEncoder(os.Stdout).Encode(vsphere.GuestOSLookup); err != nil {
			fmt.Fprintln(os.Stderr, "refnode:", err)
			os.Exit(1)
		}
		return
	}
	if *creds {
		if err := runCredentials(*timeout, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "refnode:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*configPath, *timeout, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "refnode:", err)
		os.Exit(1)
	}
}

func run(configPath string, timeout time.Duration, in io.Reader, out io.Writer) error {
	cloud, err := cloudprovider.InitCloudProvider("vsphere", configPath)
	if err != nil {
		return fmt.Errorf("the reference rejects %s: %w", configPath, err)
	}
	if cloud == nil {
		return fmt.Errorf("the reference built no provider from %s", configPath)
	}
	stop := make(chan struct{})
	defer close(stop)
	cloud.Initialize(builder{fake.NewSimpleClientset()}, stop)
	inst, _ := cloud.Instances()
	v2, ok := cloud.InstancesV2()
	if !ok {
		return fmt.Errorf("the reference has no InstancesV2")
	}
	enc := json.NewEncoder(out)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var q Query
		if err := json.Unmarshal(sc.Bytes(), &q); err != nil {
			return fmt.Errorf("query %q: %w", sc.Text(), err)
		}
		if err := enc.Encode(answer(inst, v2, q, timeout)); err != nil {
			return err
		}
	}
	return sc.Err()
}

func answer(inst cloudprovider.Instances, v2 cloudprovider.InstancesV2, q Query, timeout time.Duration) Answer {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if q.SkipNodeDeletion {
		os.Setenv("SKIP_NODE_DELETION", "true")
		defer os.Unsetenv("SKIP_NODE_DELETION")
	}
	node := q.Node.DeepCopy()
	if q.Register && node.Status.NodeInfo.SystemUUID != "" {
		// RegisterNode: DiscoverNode(ConvertK8sUUIDtoNormal(systemUUID), FindVMByUUID),
		// reached here through InstanceExistsByProviderID, which makes the same call
		// first. (NodeAddressesByProviderID makes it too, but then reads its cache by
		// the converted UUID, and panics when the VM was found by the other byte order.)
		_, _ = inst.InstanceExistsByProviderID(ctx, "vsphere://"+convertK8sUUIDtoNormal(node.Status.NodeInfo.SystemUUID))
	}
	a := Answer{ID: q.ID}
	md, err := v2.InstanceMetadata(ctx, node)
	if err != nil {
		a.MetadataError = err.Error()
	} else {
		a.Metadata = &Metadata{ProviderID: md.ProviderID, InstanceType: md.InstanceType, Addresses: md.NodeAddresses,
			Zone: md.Zone, Region: md.Region, Labels: md.AdditionalLabels}
	}
	a.Exists.Value, err = v2.InstanceExists(ctx, node)
	a.Exists.Error = errString(err)
	a.Shutdown.Value, err = v2.InstanceShutdown(ctx, node)
	a.Shutdown.Error = errString(err)
	return a
}

// convertK8sUUIDtoNormal is the reference's ConvertK8sUUIDtoNormal
// (pkg/cloudprovider/vsphere/util.go), which RegisterNode applies to the
// systemUUID; it is not reachable from outside the package.
func convertK8sUUIDtoNormal(u string) string {
	if len(u) < 36 {
		return u
	}
	return fmt.Sprintf("%s%s%s%s-%s%s-%s%s-%s-%s", u[6:8], u[4:6], u[2:4], u[0:2], u[11:13], u[9:11],
		u[16:18], u[14:16], u[19:23], u[24:36])
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// builder hands the reference a Kubernetes client, as the framework does.
type builder struct{ client kubernetes.Interface }

func (b builder) Config(string) (*restclient.Config, error)   { return &restclient.Config{}, nil }
func (b builder) ConfigOrDie(string) *restclient.Config       { return &restclient.Config{} }
func (b builder) Client(string) (kubernetes.Interface, error) { return b.client, nil }
func (b builder) ClientOrDie(string) kubernetes.Interface     { return b.client }

// writeGuestOSGo writes the reference's table as Go source for the CCM.
func writeGuestOSGo(w io.Writer) {
	keys := make([]string, 0, len(vsphere.GuestOSLookup))
	for k := range vsphere.GuestOSLookup {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(w, "// Code generated by hack/refnode -guest-os-go from k8s.io/cloud-provider-vsphere %s; DO NOT EDIT.\n\n", refVersion)
	fmt.Fprintln(w, "package provider")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "// guestOS maps a VM's guestId to the short OS name of its instance type, exactly as the")
	fmt.Fprintln(w, "// reference CCM's GuestOSLookup does (a guestId it does not list is \"unknown\"), so that")
	fmt.Fprintln(w, "// Nodes of a migrated cluster keep their node.kubernetes.io/instance-type. make parity checks")
	fmt.Fprintln(w, "// it against the reference's own table.")
	fmt.Fprintln(w, "var guestOS = map[string]string{")
	for _, k := range keys {
		fmt.Fprintf(w, "\t%q: %q,\n", k, vsphere.GuestOSLookup[k])
	}
	fmt.Fprintln(w, "}")
}

// refVersion is the reference's source: go.mod's v1.36.0 with the files
// of head/ in place of theirs (go build -overlay; see head/README.md).
const refVersion = "master at 60f6c5dfe164 (v1.36.0 with head/ overlaid)"
