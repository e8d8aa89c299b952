package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/credentials"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/secret"
)

// resolvedCredentials is what `config validate` can tell of one vCenter's
// credentials without a cluster: the mode and source the CCM would use,
// from the Secret manifests given with --secret, the secrets directory when
// it exists here, and the inline config. Nothing secret.
type resolvedCredentials struct {
	Mode     secret.Mode `json:"mode,omitempty"`
	Source   string      `json:"source,omitempty"`
	Identity string      `json:"identity,omitempty"`
	// Unknown says why the mode cannot be told here (a Secret not given).
	Unknown string `json:"unknown,omitempty"`
	// Error is a problem the CCM would hit before any request.
	Error string `json:"error,omitempty"`
}

// offlineSources reads Secret manifests and the config's secrets
// directory (when it exists on this machine). warnings name ignored keys
// and unusable entries; values never appear.
func offlineSources(cfg *config.Config, secretFiles []string) (credentials.Sources, []string, error) {
	src := credentials.Sources{Secrets: map[config.SecretRef]credentials.Set{}}
	var warnings []string
	for _, f := range secretFiles {
		secrets, err := readSecretManifests(f)
		if err != nil {
			return src, nil, err
		}
		for _, s := range secrets {
			ref := config.SecretRef{Namespace: s.Namespace, Name: s.Name}
			set, warns, err := credentials.ParseData(s.Data)
			for _, w := range warns {
				warnings = append(warnings, fmt.Sprintf("%s: Secret %s: %s", f, ref, w))
			}
			if err != nil {
				warnings = append(warnings, fmt.Sprintf("%s: Secret %s: %v", f, ref, err))
			}
			src.Secrets[ref] = set
		}
	}
	if dir := cfg.Global.SecretsDirectory; dir != "" {
		if _, err := os.Stat(dir); err == nil {
			raw, err := credentials.ReadDirectory(dir)
			if err != nil {
				warnings = append(warnings, err.Error())
			}
			set, warns, err := credentials.ParseData(raw)
			warnings = append(warnings, warns...)
			if err != nil {
				warnings = append(warnings, fmt.Sprintf("secrets directory %s: %v", dir, err))
			}
			src.Directory = set
		}
	}
	return src, warnings, nil
}

// resolveOffline tells each vCenter's credential mode and source.
func resolveOffline(cfg *config.Config, src credentials.Sources, now time.Time) map[string]resolvedCredentials {
	out := map[string]resolvedCredentials{}
	for _, vc := range cfg.VCenters {
		// A Secret not given, or a directory not on this machine, may hold
		// the credentials: say so rather than guess.
		unknown := ""
		c := vc.Credentials
		for _, ref := range []*config.SecretRef{c.Secret, c.GlobalSecret} {
			if ref != nil && unknown == "" {
				if _, ok := src.Secrets[*ref]; !ok {
					unknown = fmt.Sprintf("Secret %s not given (--secret FILE)", ref)
				}
			}
		}
		if unknown == "" && c.SecretsDirectory != "" && src.Directory == nil {
			unknown = fmt.Sprintf("secrets directory %s not on this machine", c.SecretsDirectory)
		}
		creds, source, err := credentials.Resolve(vc, src)
		var r resolvedCredentials
		switch {
		case err == nil:
			r = resolvedCredentials{Mode: creds.Mode(), Source: source, Identity: creds.Identity()}
			if cert, ok := creds.(secret.Certificate); ok {
				if err := cert.CheckValidity(now); err != nil {
					r.Error = err.Error()
				}
			}
		case unknown != "" && errors.Is(err, credentials.ErrNoCredentials):
			r.Unknown = unknown
		default:
			r.Error = err.Error()
		}
		out[vc.Name] = r
	}
	return out
}

// readSecretManifests reads the Secrets of a YAML or JSON file (several
// documents, or a v1 List), as kubectl prints them; stringData is merged
// into data as the API server does.
func readSecretManifests(path string) ([]corev1.Secret, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--secret: %w", err)
	}
	defer func() { _ = f.Close() }()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var out []corev1.Secret
	for {
		var doc struct {
			corev1.Secret `json:",inline"`
			Items         []corev1.Secret `json:"items"`
		}
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			// The decoder's errors name a line and a type, not a value.
			return nil, fmt.Errorf("--secret %s: not a Secret manifest: %w", path, err)
		}
		docs := doc.Items
		if doc.Kind == "Secret" {
			docs = append(docs, doc.Secret)
		}
		for _, s := range docs {
			if s.Data == nil {
				s.Data = map[string][]byte{}
			}
			for k, v := range s.StringData {
				s.Data[k] = []byte(v)
			}
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--secret %s: no Secret found", path)
	}
	return out, nil
}
