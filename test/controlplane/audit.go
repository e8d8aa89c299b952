package controlplane

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// auditPolicy records every write to a Node (and its status) at the
// Metadata level: who, with which user agent, which verb; nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    verbs: [create, update, patch, delete]
    resources:
      - group: ""
        resources: [nodes, nodes/status]
  - level: None
`

// writeAuditPolicy writes the policy into dir and returns the API server
// flags that use it, logging to dir/audit.log.
func writeAuditPolicy(dir string) ([]string, error) {
	p := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(p, []byte(auditPolicy), 0o600); err != nil {
		return nil, err
	}
	return []string{"--audit-policy-file=" + p, "--audit-log-path=" + filepath.Join(dir, "audit.log"),
		"--audit-log-mode=blocking", "--audit-log-format=json"}, nil
}

// NodeWrite is one write to a Node seen by the API server.
type NodeWrite struct {
	Verb        string
	Node        string
	Subresource string
	User        string
	UserAgent   string
	Code        int
}

// NodeWrites returns every Node write the API server has logged so far.
func (cp *ControlPlane) NodeWrites() ([]NodeWrite, error) {
	f, err := os.Open(filepath.Join(cp.Dir, "audit.log"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []NodeWrite
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct {
			Verb      string `json:"verb"`
			UserAgent string `json:"userAgent"`
			User      struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef struct {
				Resource    string `json:"resource"`
				Name        string `json:"name"`
				Subresource string `json:"subresource"`
			} `json:"objectRef"`
			ResponseStatus struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("audit log: %w", err)
		}
		if ev.ObjectRef.Resource != "nodes" {
			continue
		}
		out = append(out, NodeWrite{Verb: ev.Verb, Node: ev.ObjectRef.Name, Subresource: ev.ObjectRef.Subresource,
			User: ev.User.Username, UserAgent: ev.UserAgent, Code: ev.ResponseStatus.Code})
	}
	return out, sc.Err()
}
