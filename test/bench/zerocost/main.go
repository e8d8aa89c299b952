// Command zerocost is a cloud controller manager with a provider that
// answers instantly from memory, run by `make bench` through the same
// controllers and API server as the real CCM to get the floor that the
// vSphere CCM is compared with. It is not a product.
//
//	zerocost --answers=answers.json [cloud-controller-manager flags]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	cloudconfig "k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	cliflag "k8s.io/component-base/cli/flag"
)

// Answer is what the provider returns for one node name.
type Answer struct {
	ProviderID   string `json:"providerID"`
	InstanceType string `json:"instanceType"`
	InternalIP   string `json:"internalIP"`
	Zone         string `json:"zone"`
	Region       string `json:"region"`
}

type memory struct{ answers map[string]Answer }

func (m *memory) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {}
func (m *memory) LoadBalancer() (cloudprovider.LoadBalancer, bool)                  { return nil, false }
func (m *memory) Instances() (cloudprovider.Instances, bool)                        { return nil, false }
func (m *memory) InstancesV2() (cloudprovider.InstancesV2, bool)                    { return m, true }
func (m *memory) Zones() (cloudprovider.Zones, bool)                                { return nil, false }
func (m *memory) Clusters() (cloudprovider.Clusters, bool)                          { return nil, false }
func (m *memory) Routes() (cloudprovider.Routes, bool)                              { return nil, false }
func (m *memory) ProviderName() string                                              { return "vsphere" }
func (m *memory) HasClusterID() bool                                                { return true }

func (m *memory) InstanceExists(_ context.Context, n *v1.Node) (bool, error) {
	_, ok := m.answers[n.Name]
	return ok, nil
}

func (m *memory) InstanceShutdown(context.Context, *v1.Node) (bool, error) { return false, nil }

func (m *memory) InstanceMetadata(_ context.Context, n *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	a, ok := m.answers[n.Name]
	if !ok {
		return nil, errors.New("unknown node " + n.Name)
	}
	return &cloudprovider.InstanceMetadata{ProviderID: a.ProviderID, InstanceType: a.InstanceType, Zone: a.Zone, Region: a.Region,
		NodeAddresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: a.InternalIP}, {Type: v1.NodeHostName, Address: n.Name}}}, nil
}

func main() {
	var answersPath string
	var rest []string
	for _, a := range os.Args[1:] {
		if p, ok := strings.CutPrefix(a, "--answers="); ok {
			answersPath = p
			continue
		}
		if strings.HasPrefix(a, "--cloud-config=") {
			continue // the real CCM's flag; not used here
		}
		rest = append(rest, a)
	}
	b, err := os.ReadFile(answersPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "zerocost: --answers:", err)
		os.Exit(1)
	}
	m := &memory{}
	if err := json.Unmarshal(b, &m.answers); err != nil {
		fmt.Fprintln(os.Stderr, "zerocost:", err)
		os.Exit(1)
	}
	opts, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	opts.KubeCloudShared.CloudProvider.Name = "vsphere"
	ctrls := map[string]app.ControllerInitFuncConstructor{}
	for _, n := range []string{names.CloudNodeController, names.CloudNodeLifecycleController} {
		ctrls[n] = app.DefaultInitFuncConstructors[n]
	}
	cmd := app.NewCloudControllerManagerCommand(opts, func(*cloudconfig.CompletedConfig) cloudprovider.Interface { return m },
		ctrls, names.CCMControllerAliases(), cliflag.NamedFlagSets{}, wait.NeverStop)
	cmd.SetArgs(rest)
	if err := cmd.Execute(); err != nil {
		os.Exit(1)
	}
}
