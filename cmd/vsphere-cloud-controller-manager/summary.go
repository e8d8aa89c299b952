package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
)

// printSummary writes the one-screen view of a valid config: vCenters,
// datacenters, credential sources and topology categories.
func printSummary(w io.Writer, path string, cfg *config.Config, resolved map[string]resolvedCredentials) {
	fmt.Fprintf(w, "%s: valid, %d vCenter(s)\n\n", path, len(cfg.VCenters))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VCENTER\tSERVER\tDATACENTERS\tTLS\tCREDENTIALS (in order)\tLOGIN")
	for _, vc := range cfg.VCenters {
		dcs := strings.Join(vc.Datacenters, ",")
		if dcs == "" {
			dcs = "(all)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", vc.Name, vc.Address(), dcs, tlsMode(vc), strings.Join(vc.Credentials.Sources(), ", then "), resolved[vc.Name].describe())
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintf(w, "zone category:   %s\n", orNone(cfg.Labels.Zone))
	fmt.Fprintf(w, "region category: %s\n", orNone(cfg.Labels.Region))
	for _, a := range cfg.Labels.Additional {
		if a.Attribute != "" {
			fmt.Fprintf(w, "label %s from custom attribute %s\n", a.Label, a.Attribute)
			continue
		}
		fmt.Fprintf(w, "label %s from category %s\n", a.Label, a.Category)
	}
	for _, vc := range cfg.VCenters {
		st := vc.StaticTopology
		if st.IsZero() {
			continue
		}
		fmt.Fprintf(w, "static topology for %s: zone=%s region=%s", vc.Name, orNone(st.Zone), orNone(st.Region))
		for dc, zr := range st.Datacenters {
			fmt.Fprintf(w, "; %s: zone=%s region=%s", dc, orNone(zr.Zone), orNone(zr.Region))
		}
		fmt.Fprintln(w)
	}
	for i, h := range cfg.HostGroupZones {
		zones := h.HostGroupPattern
		if zones == "" {
			var pairs []string
			for _, g := range h.GroupNames() {
				pairs = append(pairs, g+"="+h.HostGroups[g])
			}
			zones = strings.Join(pairs, ",")
		}
		fmt.Fprintf(w, "host group zones [%d]: cluster %s (vcenter %s, datacenter %s): %s, region %s\n", i, h.Cluster,
			orAny(h.VCenter), orAny(h.Datacenter), zones, orNone(h.Region))
	}
	if cfg.Labels.CSICompatible {
		fmt.Fprintln(w, "resolution:      as vSphere CSI (host chain only)")
	}
	fmt.Fprintf(w, "on drift:        %s\n", cfg.Labels.OnDrift)
	methods := make([]string, len(cfg.Nodes.LookupOrder))
	for i, m := range cfg.Nodes.LookupOrder {
		methods[i] = string(m)
	}
	fmt.Fprintf(w, "node lookup:     %s\n", strings.Join(methods, ", then "))
	switch {
	case cfg.Nodes.SkipNodeDeletion:
		fmt.Fprintf(w, "node deletion:   never (%s is set)\n", config.SkipNodeDeletionEnv)
	case cfg.Nodes.Deletion == config.DeletionOnProof && cfg.Nodes.DeletionDelay > 0:
		fmt.Fprintf(w, "node deletion:   %s, once proven for %s\n", cfg.Nodes.Deletion, cfg.Nodes.DeletionDelay)
	default:
		fmt.Fprintf(w, "node deletion:   %s\n", cfg.Nodes.Deletion)
	}
}

func orAny(s string) string {
	if s == "" {
		return "any"
	}
	return s
}

func tlsMode(vc config.VCenter) string {
	switch {
	case vc.InsecureFlag:
		return "INSECURE"
	case vc.Thumbprint != "":
		return "thumbprint"
	case vc.CAFile != "":
		return "CA " + vc.CAFile
	default:
		return "system CAs"
	}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// describe is the LOGIN column: the mode, who and from where; or why it
// cannot be told here; or what is wrong.
func (r resolvedCredentials) describe() string {
	switch {
	case r.Error != "":
		return "UNUSABLE (see below)"
	case r.Unknown != "":
		return "unknown here: " + r.Unknown
	case r.Mode == "":
		return "none"
	}
	return fmt.Sprintf("%s: %s, from %s", r.Mode, r.Identity, r.Source)
}
