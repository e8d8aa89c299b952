// Package provider is the Kubernetes side: it implements
// k8s.io/cloud-provider's Interface with InstancesV2 on top of the vSphere
// packages (vcenter, inventory, topology). It is the only package that
// speaks Kubernetes types besides the credential manager's Secret watch.
package provider
