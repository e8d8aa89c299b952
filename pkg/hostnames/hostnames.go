// Package hostnames holds the one rule on which guest host names a Node
// may carry in its serving certificate, shared by the provider (which
// publishes a Node's Hostname address) and the serving-csr controller
// (which approves it), so that a truthful Node is never published a name
// its certificate request is then denied.
package hostnames

import "strings"

// Fits reports whether host, the host name a Node's guest reports (the
// guest's own word), may name the Node called node: it is the Node's
// name, or its first label is the Node's name and, when domains are set,
// the rest is one of them or under one. Case is ignored, and a final dot.
func Fits(node, host string, domains []string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	node = strings.ToLower(node)
	if host == "" {
		return false
	}
	if host == node {
		return true
	}
	first, rest, ok := strings.Cut(host, ".")
	if !ok || first != node {
		return false
	}
	return len(domains) == 0 || Under(rest, domains)
}

// Under reports whether name is one of domains or under one (domains
// lower case, without dots at either end).
func Under(name string, domains []string) bool {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	for _, d := range domains {
		if name == d || strings.HasSuffix(name, "."+d) {
			return true
		}
	}
	return false
}

// FirstLabel is the first DNS label of a host name.
func FirstLabel(host string) string {
	label, _, _ := strings.Cut(host, ".")
	return label
}
