package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
)

// validationReport is `config validate -o json`: for CI pipelines that
// check cloud-configs. It never holds a secret: diagnostics never echo
// values of password lines, and the summary lists credential sources, not
// credentials.
type validationReport struct {
	File           string                  `json:"file"`
	Valid          bool                    `json:"valid"`
	Format         string                  `json:"format,omitempty"`
	Errors         []diagnostic            `json:"errors"`
	Warnings       []diagnostic            `json:"warnings"`
	VCenters       []vcenterSummary        `json:"vcenters,omitempty"`
	Labels         *config.Labels          `json:"labels,omitempty"`
	HostGroupZones []config.HostGroupZones `json:"hostGroupZones,omitempty"`
	LookupOrder    []config.LookupMethod   `json:"lookupOrder,omitempty"`
	Deletion       config.DeletionPolicy   `json:"deletion,omitempty"`
}

// diagnostic is one problem or warning: where (file and line, or the
// environment variable), which field, what to do.
type diagnostic struct {
	File    string `json:"file,omitempty"`
	Line    int    `json:"line,omitempty"`
	Env     string `json:"env,omitempty"`
	Field   string `json:"field,omitempty"`
	Key     string `json:"key,omitempty"`
	Message string `json:"message"`
	// Text is the whole diagnostic as the text output prints it.
	Text string `json:"text"`
}

type vcenterSummary struct {
	Name              string   `json:"name"`
	Server            string   `json:"server"`
	Port              int      `json:"port"`
	Datacenters       []string `json:"datacenters"`
	TLS               string   `json:"tls"`
	CredentialSources []string `json:"credentialSources"`
	// Credentials is the mode and source the CCM would use, when they can
	// be told without a cluster.
	Credentials resolvedCredentials `json:"credentials"`
}

func diagnostics(ds []config.Diagnostic) []diagnostic {
	out := make([]diagnostic, 0, len(ds))
	for _, d := range ds {
		out = append(out, diagnostic{File: d.Pos.File, Line: d.Pos.Line, Env: d.Pos.Env, Field: d.Field, Key: d.Key, Message: d.Message, Text: d.Error()})
	}
	return out
}

// writeValidationReport validates path and writes the JSON report; it
// reports whether the config is valid. Errors that are not about the
// config's content (an unreadable file) are diagnostics too.
func writeValidationReport(w io.Writer, path string, env []string, secretFiles []string) (bool, error) {
	cfg, warnings, err := config.Load(path, config.Options{Env: env})
	r := validationReport{File: path, Valid: err == nil, Errors: []diagnostic{}, Warnings: diagnostics(warnings)}
	if data, rerr := os.ReadFile(path); rerr == nil {
		r.Format = config.DetectFormat(data).String()
	}
	if err != nil {
		var errs config.Errors
		if errors.As(err, &errs) {
			r.Errors = diagnostics(errs)
		} else {
			r.Errors = []diagnostic{{File: path, Message: err.Error(), Text: err.Error()}}
		}
	} else {
		src, warnings, err := offlineSources(cfg, secretFiles)
		if err != nil {
			return false, err
		}
		for _, w := range warnings {
			r.Warnings = append(r.Warnings, diagnostic{Message: w, Text: w})
		}
		resolved := resolveOffline(cfg, src, time.Now())
		for _, vc := range cfg.VCenters {
			rc := resolved[vc.Name]
			r.VCenters = append(r.VCenters, vcenterSummary{Name: vc.Name, Server: vc.Server, Port: vc.Port, Datacenters: vc.Datacenters,
				TLS: tlsMode(vc), CredentialSources: vc.Credentials.Sources(), Credentials: rc})
			if rc.Error != "" {
				r.Valid = false
				r.Errors = append(r.Errors, diagnostic{Field: fmt.Sprintf("vcenter[%q].credentials", vc.Name), Message: rc.Error,
					Text: fmt.Sprintf("vcenter %q: credentials: %s", vc.Name, rc.Error)})
			}
		}
		r.Labels, r.HostGroupZones = &cfg.Labels, cfg.HostGroupZones
		r.LookupOrder, r.Deletion = cfg.Nodes.LookupOrder, cfg.Nodes.Deletion
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return r.Valid, enc.Encode(r)
}
