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
    server: vc-a.example.com
    datacenters: dc-1, dc-2
    ca-file: /etc/ca.pem
labels:
  zone: k8s-zone
`)
	_, _, err := config.Parse("vsphere.conf", file, config.Options{})
	fmt.Println(err)

	cfg, _, err := config.Parse("vsphere.conf", []byte("[VirtualCenter \"vc-a.example.com\"]\nuser = u\npassword = p\n"), config.Options{})
	if err != nil {
		panic(err)
	}
	vc := cfg.VCenters[0]
	fmt.Println(vc.Address(), vc.Credentials.Sources(), vc.Credentials.Password)
	// Output:
	// vsphere.conf:9: vcenter["site-a"].ca-file: unknown key "ca-file" in vcenter["site-a"]; did you mean caFile? (ca-file is the INI spelling)
	// vc-a.example.com:443 [inline user u] [redacted]
}
