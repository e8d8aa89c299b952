// Package guestinfo reads the cloud-init metadata a VM carries in its
// extraConfig (guestinfo.metadata, as Cluster API Provider vSphere and
// other provisioners write it) for what the CCM needs of it: the addresses
// the network config sets statically, in order.
//
// It reads the metadata as the reference CCM does
// (k8s.io/cloud-provider-vsphere, nodemanager.go
// sortStaticallyConfiguredAddressesFirst), so that a migrating cluster's
// Nodes keep their addresses: only base64-encoded metadata is read; its
// network key may itself be base64 or gzip+base64 (network.encoding); the
// addresses are those of network.ethernets.*.addresses, without their
// prefix length.
package guestinfo

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"

	"go.yaml.in/yaml/v2"
)

// maxNetwork bounds a decompressed network config (the reference has no
// bound; a real one is a few kilobytes, and this keeps a hostile one from
// taking the CCM's memory).
const maxNetwork = 16 << 20

// networkConfig is what the reference decodes of a network config: with
// its types, so that what fails to decode there fails here too.
type networkConfig struct {
	Ethernets map[string]struct {
		Name      string   `yaml:"set-name"`
		Addresses []string `yaml:"addresses"`
	} `yaml:"ethernets"`
}

// StaticOrder returns the rank of each statically configured address of
// the metadata (value of guestinfo.metadata, with encoding the value of
// guestinfo.metadata.encoding), keyed by the address in Go's canonical
// text (net.IP.String). It is nil when the metadata is absent or not
// base64-encoded (the reference reads no other), and an error when it
// cannot be read: the reference then fails the Node's lookup.
//
// Ethernets are taken in the order of their names: the reference takes
// them in Go's random map order, so its order of two ethernets' addresses
// varies from call to call.
func StaticOrder(metadata, encoding string) (map[string]int, error) {
	if metadata == "" || encoding != "base64" {
		return nil, nil
	}
	doc, err := base64.StdEncoding.DecodeString(metadata)
	if err != nil {
		return nil, fmt.Errorf("guestinfo.metadata: not base64: %w", err)
	}
	var head struct {
		NetworkEncoding string `yaml:"network.encoding"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return nil, fmt.Errorf("guestinfo.metadata: %w", err)
	}
	var network networkConfig
	switch head.NetworkEncoding {
	case "base64", "b64", "gzip+base64", "gz+b64":
		var enc struct {
			Network string `yaml:"network"`
		}
		if err := yaml.Unmarshal(doc, &enc); err != nil {
			return nil, fmt.Errorf("guestinfo.metadata: %w", err)
		}
		raw, err := base64.StdEncoding.DecodeString(enc.Network)
		if err != nil {
			return nil, fmt.Errorf("guestinfo.metadata: network (%s): not base64: %w", head.NetworkEncoding, err)
		}
		if strings.HasPrefix(head.NetworkEncoding, "gz") {
			if raw, err = gunzip(raw); err != nil {
				return nil, fmt.Errorf("guestinfo.metadata: network (%s): %w", head.NetworkEncoding, err)
			}
		}
		if err := yaml.Unmarshal(raw, &network); err != nil {
			return nil, fmt.Errorf("guestinfo.metadata: network: %w", err)
		}
	default:
		var plain struct {
			Network networkConfig `yaml:"network"`
		}
		if err := yaml.Unmarshal(doc, &plain); err != nil {
			return nil, fmt.Errorf("guestinfo.metadata: %w", err)
		}
		network = plain.Network
	}
	names := make([]string, 0, len(network.Ethernets))
	for n := range network.Ethernets {
		names = append(names, n)
	}
	slices.Sort(names)
	order := map[string]int{}
	for _, n := range names {
		for _, a := range network.Ethernets[n].Addresses {
			// As the reference: the rank is the count of distinct
			// addresses so far, and text that is no address is "<nil>".
			ip, _, _ := strings.Cut(a, "/")
			order[net.ParseIP(ip).String()] = len(order)
		}
	}
	return order, nil
}

func gunzip(b []byte) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	out, err := io.ReadAll(io.LimitReader(r, maxNetwork+1))
	if err != nil {
		return nil, err
	}
	if len(out) > maxNetwork {
		return nil, fmt.Errorf("more than %d bytes decompressed", maxNetwork)
	}
	return out, r.Close()
}
