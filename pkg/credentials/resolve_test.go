package credentials

import (
	"errors"
	"strings"
	"testing"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/secret"
)

// TestResolveSessionManager: where a bearer token may go. The Pod's
// service-account token goes only to a session manager the cloud-config
// names; one a Secret or the secrets directory names must come with its
// own token; a plain http URL from any source is refused unless the
// config allows it for that vCenter. Refusals name the source and keys,
// never the token.
func TestResolveSessionManager(t *testing.T) {
	ref := config.SecretRef{Namespace: "kube-system", Name: "creds"}
	session := func(url, token string) secret.SharedSession {
		s, err := secret.NewSharedSession(url, secret.New(token), "")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, tc := range []struct {
		name      string
		inline    secret.Credentials
		secret    secret.Credentials
		allowHTTP bool
		tokenFile string // want this token file used ("" for none)
		refused   string // want ErrSessionManagerRefused, with this text
	}{
		{name: "config URL without token: the service-account token", inline: session("https://sm.example.com/t", ""), tokenFile: config.DefaultSessionManagerTokenFile},
		{name: "config URL with its token", inline: session("https://sm.example.com/t", "tok-cfg")},
		{name: "Secret URL with its token", secret: session("https://sm.example.com/t", "tok-secret")},
		{name: "Secret URL without token: refused", secret: session("https://evil.example.com/t", ""),
			refused: "Secret kube-system/creds names a session manager (key vc.example.com.vc-session-manager-url) without its token (key vc.example.com.vc-session-manager-token)"},
		{name: "Secret http URL: refused", secret: session("http://sm.example.com/t", "tok-secret"),
			refused: "session manager URL in Secret kube-system/creds (key vc.example.com.vc-session-manager-url) is plain http"},
		{name: "Secret http URL, allowed for the vCenter", secret: session("http://sm.example.com/t", "tok-secret"), allowHTTP: true},
		{name: "config http URL, allowed", inline: session("http://sm.example.com/t", ""), allowHTTP: true, tokenFile: config.DefaultSessionManagerTokenFile},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vc := config.VCenter{Name: "a", Server: "vc.example.com", Credentials: config.Credentials{Inline: tc.inline, AllowHTTP: tc.allowHTTP}}
			src := Sources{}
			if tc.secret != nil {
				vc.Credentials.Secret = &ref
				src.Secrets = map[config.SecretRef]Set{ref: {"vc.example.com": tc.secret}}
			}
			creds, _, err := Resolve(vc, src)
			if tc.refused != "" {
				if !errors.Is(err, ErrSessionManagerRefused) || !strings.Contains(err.Error(), tc.refused) || creds != nil {
					t.Fatalf("%v, %v; want refused with %q", creds, err, tc.refused)
				}
				for _, s := range []string{"tok-secret", "tok-cfg"} {
					if strings.Contains(err.Error(), s) {
						t.Errorf("the token is in the error")
					}
				}
				return
			}
			s, ok := creds.(secret.SharedSession)
			if err != nil || !ok || s.TokenFile != tc.tokenFile {
				t.Fatalf("%v, %v; want a shared session with token file %q", creds, err, tc.tokenFile)
			}
		})
	}
}
