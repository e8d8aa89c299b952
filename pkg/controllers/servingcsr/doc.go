// Package servingcsr decides kubelet serving certificate requests (signer
// kubernetes.io/kubelet-serving) against what vCenter says of the Node's
// VM: a certificate is approved only for the names and addresses that are
// provably the requesting Node's.
//
// This first step holds the request checks that need no vCenter
// (Inspect): the signer, the requester, the subject, the key usages and
// the shape of every SAN. A request that fails them is denied with a
// reason; one that passes is matched against the VM by the controller.
package servingcsr
