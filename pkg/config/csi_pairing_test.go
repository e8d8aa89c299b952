package config

import (
	"bufio"
	"os"
	"regexp"
	"strings"
	"testing"
)

// csiConf is what the pairing needs from vSphere CSI's csi-vsphere.conf.
type csiConf struct {
	vcenters   map[string][]string // server -> datacenters
	zone       string              // [Labels] zone
	region     string              // [Labels] region
	categories []string            // [Labels] topology-categories
}

var sectionRE = regexp.MustCompile(`^\[(\w+)(?:\s+"([^"]*)")?\]$`)

// readCSIConf reads the few keys of a csi-vsphere.conf the pairing checks.
func readCSIConf(t *testing.T, path string) csiConf {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := csiConf{vcenters: map[string][]string{}}
	var section, sub string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
			continue
		}
		if m := sectionRE.FindStringSubmatch(line); m != nil {
			section, sub = strings.ToLower(m[1]), m[2]
			if section == "virtualcenter" {
				c.vcenters[sub] = nil
			}
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: line %q is not key = value", path, line)
		}
		k, v = strings.TrimSpace(k), strings.Trim(strings.TrimSpace(v), `"`)
		list := func() []string {
			var out []string
			for _, s := range strings.Split(v, ",") {
				out = append(out, strings.TrimSpace(s))
			}
			return out
		}
		switch {
		case section == "virtualcenter" && k == "datacenters":
			c.vcenters[sub] = list()
		case section == "labels" && k == "zone":
			c.zone = v
		case section == "labels" && k == "region":
			c.region = v
		case section == "labels" && k == "topology-categories":
			c.categories = list()
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCSIPairingExample: docs/csi.md's example pair describes the same
// vCenters, datacenters and tag categories in both drivers, the CCM
// resolves like CSI (labels.csiCompatible), and the document shows both
// files as they are.
func TestCSIPairingExample(t *testing.T) {
	const ccmPath, csiPath, doc = "../../config-examples/csi-compatible.yaml", "../../docs/examples/csi-vsphere.conf", "../../docs/csi.md"
	ccm := mustParse(t, ccmPath, Options{})
	csi := readCSIConf(t, csiPath)
	if !ccm.Labels.CSICompatible {
		t.Errorf("%s: labels.csiCompatible is not set", ccmPath)
	}
	// With several vCenters vSphere CSI accepts only topology-categories
	// (make parity runs its reader on the file).
	if want := []string{ccm.Labels.Zone, ccm.Labels.Region}; csi.zone != "" || csi.region != "" || strings.Join(csi.categories, ",") != strings.Join(want, ",") {
		t.Errorf("categories differ: CSI zone %q region %q topology-categories %v; want topology-categories %v (the CCM's zone and region)",
			csi.zone, csi.region, csi.categories, want)
	}
	if len(csi.vcenters) != len(ccm.VCenters) {
		t.Errorf("CSI has %d vCenters, the CCM %d", len(csi.vcenters), len(ccm.VCenters))
	}
	for _, vc := range ccm.VCenters {
		dcs, ok := csi.vcenters[vc.Server]
		if !ok {
			t.Errorf("vCenter %s (%s) is not in %s", vc.Name, vc.Server, csiPath)
			continue
		}
		if strings.Join(dcs, ",") != strings.Join(vc.Datacenters, ",") {
			t.Errorf("vCenter %s: CSI datacenters %v, CCM %v", vc.Server, dcs, vc.Datacenters)
		}
	}
	text, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{ccmPath, csiPath} {
		body, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(text), string(body)) {
			t.Errorf("%s does not show %s as it is; copy the file into the document", doc, p)
		}
	}
}
