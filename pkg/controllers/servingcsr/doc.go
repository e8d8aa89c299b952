// Package servingcsr decides kubelet serving certificate requests (signer
// kubernetes.io/kubelet-serving) against what vCenter says of the Node's
// VM: a certificate is approved only for the names and addresses that are
// provably the requesting Node's.
//
// Two steps: Inspect checks what needs no vCenter (the signer, the
// requester, the subject, the key usages and the shape of every SAN);
// Decide matches what passed against the Node and its VM through Facts
// (the addresses this CCM computes, the IP's owners across vCenters, the
// guest host name). A definite mismatch is denied with a reason; what
// cannot be told now (a vCenter down, an ambiguous VM) stays pending.
//
// Not wired yet: the controller that lists and watches requests, the
// provider's Facts, events, metrics and RBAC come next (issue 32).
package servingcsr
