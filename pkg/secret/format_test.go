package secret

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestCredentialsNeverFormat: every credential type, holding a password, a
// private key or a token, formatted with %v, %+v, %#v, %s, %q and as JSON
// (alone and inside another value) shows none of it.
func TestCredentialsNeverFormat(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	keyPEM := read("solution-user.key")
	cert, err := NewCertificate(read("solution-user.crt"), New(keyPEM))
	if err != nil {
		t.Fatal(err)
	}
	shared, err := NewSharedSession("https://sm.example.com/session", New("bearer-S3ntinel"), "")
	if err != nil {
		t.Fatal(err)
	}
	keyLine := strings.Split(keyPEM, "\n")[1]
	secrets := []string{"pass-S3ntinel", "bearer-S3ntinel", keyLine, "PRIVATE KEY"}
	for _, c := range []Credentials{Password{Username: "u", Password: New("pass-S3ntinel")}, cert, shared} {
		wrapped := struct {
			Creds Credentials
			Ptr   *Credentials
		}{c, &c}
		var out []string
		for _, v := range []any{c, wrapped, []Credentials{c}, map[string]Credentials{"k": c}} {
			for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
				out = append(out, fmt.Sprintf(verb, v))
			}
			b, err := json.Marshal(v)
			if err == nil {
				out = append(out, string(b))
			}
		}
		text := strings.Join(out, "\n")
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%T: formatted output contains secret material %q", c, s[:min(len(s), 12)])
			}
		}
	}
}

// TestCertificateFieldRefusesKeys: a private key pasted into the
// certificate (with or after the certificate) is refused with an error
// that says which field and what to do, and shows no key.
func TestCertificateFieldRefusesKeys(t *testing.T) {
	b, _ := os.ReadFile("testdata/solution-user.crt")
	k, _ := os.ReadFile("testdata/solution-user.key")
	for name, certPEM := range map[string]string{
		"certificate then key": string(b) + string(k),
		"key then certificate": string(k) + string(b),
	} {
		_, err := NewCertificate(certPEM, New(string(k)))
		if !errors.Is(err, ErrCertificate) || !strings.Contains(err.Error(), "the certificate holds a private key block") ||
			strings.Contains(err.Error(), strings.Split(string(k), "\n")[1]) {
			t.Errorf("%s: %v", name, err)
		}
		if _, err := FromUserPassword(certPEM, New(string(k))); err == nil {
			t.Errorf("%s as a username: accepted", name)
		}
	}
}
