package config_test

import (
	"fmt"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
)

func ExampleParse() {
	file := []byte(`
global:
  secretName: vsphere-credentials
  secretNamespace: kube-system
vcenter:
  site-a:
    sever: vc-a.example.com
    server: vc-a.example.com
    datacenters: dc-1, dc-2
    ca-file: /etc/ca.pem
labels:
  zone: k8s-zone
`)
	_, warnings, err := config.Parse("vsphere.conf", file, config.Options{})
	fmt.Println(err)
	for _, w := range warnings {
		fmt.Println("warning:", w)
	}

	cfg, _, err := config.Parse("vsphere.conf", []byte("[VirtualCenter \"vc-a.example.com\"]\nuser = u\npassword = p\n"), config.Options{})
	if err != nil {
		panic(err)
	}
	vc := cfg.VCenters[0]
	fmt.Println(vc.Address(), vc.Credentials.Sources(), vc.Credentials.InlineMode())
	// Output:
	// vsphere.conf:7: vcenter["site-a"].sever: unknown key "sever" in vcenter["site-a"]; did you mean server?
	// warning: vsphere.conf:10: vcenter["site-a"].ca-file: "ca-file" is the INI spelling of caFile and is ignored in YAML, as the reference CCM ignores it; rename it caFile to use it
	// vc-a.example.com:443 [inline password of u] password
}
