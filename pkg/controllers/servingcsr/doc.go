// Package servingcsr decides kubelet serving certificate requests (signer
// kubernetes.io/kubelet-serving) against what vCenter says of the Node's
// VM: a certificate is approved only for the names and addresses that are
// provably the requesting Node's (nodes.servingCertificates.approve).
//
// Two steps: Inspect checks what needs no vCenter (the signer, the
// requester, the subject, the key usages and the shape of every SAN);
// Decide matches what passed against the Node, the other Nodes (Cluster:
// no other Node on the same VM, no other Node's name) and the VM through
// Facts (the addresses this CCM computes, each IP's owners across
// vCenters, the guest host name). A definite mismatch is denied with a
// reason; what cannot be told now (a vCenter down, an ambiguous VM) stays
// pending and is retried.
//
// The Controller lists and watches requests and Nodes through the
// framework's shared informers, writes decisions through the approval
// subresource, and records events on the request and its Node and
// metrics by decision and reason. ProviderFacts are the provider's
// inventories: no vSphere request per request.
package servingcsr
