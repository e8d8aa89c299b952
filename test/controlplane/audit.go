package controlplane

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// auditPolicy records every write at the Metadata level: who, with which
// user agent, which verb on which object; nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    verbs: [create, update, patch, delete, deletecollection]
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
		"--audit-log-mode=blocking", "--audit-log-format=json",
		// Never rotated (the default rotates at 100 MB): WritesFrom's
		// offsets stay valid.
		"--audit-log-maxsize=0"}, nil
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
	all, err := cp.Writes(0)
	if err != nil {
		return nil, err
	}
	var out []NodeWrite
	for _, w := range all {
		if w.Resource == "nodes" {
			out = append(out, NodeWrite{Verb: w.Verb, Node: w.Name, Subresource: w.Subresource, User: w.User, UserAgent: w.UserAgent, Code: w.Code})
		}
	}
	return out, nil
}

// Write is one write the API server logged.
type Write struct {
	Verb, Resource, Subresource, Namespace, Name string
	User, UserAgent                              string
	Code                                         int
}

// Writes returns the writes the API server has logged from byte offset
// from of its audit log on, and the offset after the last (to read only
// what came since, call it again with that).
func (cp *ControlPlane) Writes(from int64) ([]Write, error) {
	ws, _, err := cp.WritesFrom(from)
	return ws, err
}

// WritesFrom is Writes, with the offset to read from next.
func (cp *ControlPlane) WritesFrom(from int64) ([]Write, int64, error) {
	f, err := os.Open(filepath.Join(cp.Dir, "audit.log"))
	if err != nil {
		return nil, from, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() < from {
		return nil, from, fmt.Errorf("audit log: %d bytes, shorter than the offset %d read before: it was rotated or truncated", st.Size(), from)
	}
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return nil, from, err
	}
	var out []Write
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			// A line being written is read next time, whole.
			return out, from, nil
		}
		if err != nil {
			return out, from, err
		}
		from += int64(len(line))
		var ev struct {
			Verb      string `json:"verb"`
			UserAgent string `json:"userAgent"`
			User      struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef struct {
				Resource    string `json:"resource"`
				Namespace   string `json:"namespace"`
				Name        string `json:"name"`
				Subresource string `json:"subresource"`
			} `json:"objectRef"`
			ResponseStatus struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
		}
		if err := json.Unmarshal(line, &ev); err != nil {
			return out, from, fmt.Errorf("audit log: %w", err)
		}
		out = append(out, Write{Verb: ev.Verb, Resource: ev.ObjectRef.Resource, Subresource: ev.ObjectRef.Subresource,
			Namespace: ev.ObjectRef.Namespace, Name: ev.ObjectRef.Name,
			User: ev.User.Username, UserAgent: ev.UserAgent, Code: ev.ResponseStatus.Code})
	}
}
