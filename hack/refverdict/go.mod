module refverdict

go 1.26.0

require (
	k8s.io/cloud-provider-vsphere v1.36.0
	k8s.io/klog/v2 v2.140.0
	sigs.k8s.io/yaml v1.6.0
)

require (
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/vmware/vsphere-automation-sdk-go/runtime v0.7.0 // indirect
	github.com/vmware/vsphere-automation-sdk-go/services/nsxt v0.12.0 // indirect
	go.yaml.in/yaml/v2 v2.4.3 // indirect
	golang.org/x/text v0.36.0 // indirect
	gopkg.in/gcfg.v1 v1.2.3 // indirect
	gopkg.in/warnings.v0 v0.1.2 // indirect
	gopkg.in/yaml.v2 v2.4.0 // indirect
	k8s.io/apimachinery v0.36.0 // indirect
)
