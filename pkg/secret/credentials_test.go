package secret

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func read(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestFromUserPassword: the reference CCM's rule (a PEM username is a
// certificate, its password the key), and what it must refuse.
func TestFromUserPassword(t *testing.T) {
	cert, key, other := read(t, "solution-user.crt"), read(t, "solution-user.key"), read(t, "other.key")
	tests := []struct {
		name     string
		user     string
		password string
		mode     Mode
		identity string
		err      error
		errText  string
	}{
		{name: "password", user: "admin@vsphere.local", password: "pa:ss=word", mode: ModePassword, identity: "admin@vsphere.local"},
		{name: "certificate and its key", user: cert, password: key, mode: ModeCertificate, identity: "certificate CN=k8s-ccm-solution-user,OU=solution users"},
		{name: "certificate and its key with CRLF line ends", user: strings.ReplaceAll(cert, "\n", "\r\n"), password: strings.ReplaceAll(key, "\n", "\r\n"), mode: ModeCertificate, identity: "certificate CN=k8s-ccm-solution-user,OU=solution users"},
		{name: "key of another certificate", user: cert, password: other, err: ErrCertificate, errText: "does not match"},
		{name: "certificate with a password", user: cert, password: "pa:ss=word", err: ErrCertificate, errText: "must be its PEM private key"},
		{name: "key as password of a user", user: "admin@vsphere.local", password: key, err: ErrPrivateKeyAsPassword},
		{name: "PKCS#8 key as password of a user", user: "admin@vsphere.local", password: other, err: ErrPrivateKeyAsPassword},
		{name: "key with broken armour as password", user: "admin@vsphere.local", password: strings.ReplaceAll(key, "\n", ""), err: ErrPrivateKeyAsPassword},
		{name: "key and certificate swapped", user: key, password: cert, err: ErrCertificate, errText: "the certificate holds a private key block"},
		{name: "an ECDSA solution user", user: read(t, "ec.crt"), password: read(t, "ec.key"), err: ErrCertificate, errText: "RSA keys only"},
		{name: "garbage PEM certificate", user: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", password: key, err: ErrCertificate, errText: "does not parse"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := FromUserPassword(tt.user, New(tt.password))
			if tt.err != nil {
				if !errors.Is(err, tt.err) || !strings.Contains(fmt.Sprint(err), tt.errText) {
					t.Fatalf("err = %v, want %v containing %q", err, tt.err, tt.errText)
				}
				if c != nil {
					t.Fatalf("credentials %v returned with an error", c)
				}
				for _, l := range strings.Split(tt.password, "\n") {
					if len(l) > 20 && strings.Contains(err.Error(), l) {
						t.Fatalf("the error reveals the password: %v", err)
					}
				}
				return
			}
			if err != nil || c.Mode() != tt.mode || c.Identity() != tt.identity {
				t.Fatalf("got %v %q (%v), want %v %q", c.Mode(), c.Identity(), err, tt.mode, tt.identity)
			}
			for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
				if out := fmt.Sprintf(verb, c); strings.Contains(out, "PRIVATE KEY") || strings.Contains(out, "pa:ss") {
					t.Fatalf("%s prints the secret: %s", verb, out)
				}
			}
		})
	}
}

func TestCertificateValidity(t *testing.T) {
	c, err := NewCertificate(read(t, "expired.crt"), New(read(t, "expired.key")))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckValidity(time.Date(2020, 6, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Errorf("within its validity: %v", err)
	}
	err = c.CheckValidity(time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC))
	if !errors.Is(err, ErrCertificate) || !strings.Contains(err.Error(), "expired at 2021-01-01T00:00:00Z") {
		t.Errorf("after expiry: %v", err)
	}
	err = c.CheckValidity(time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC))
	if !errors.Is(err, ErrCertificate) || !strings.Contains(err.Error(), "not valid before") {
		t.Errorf("before validity: %v", err)
	}
}

func TestSameIdentity(t *testing.T) {
	cert, key := read(t, "solution-user.crt"), read(t, "solution-user.key")
	c, err := NewCertificate(cert, New(key))
	if err != nil {
		t.Fatal(err)
	}
	s1, _ := NewSharedSession("https://sm.example.com/session?x=1", New("t1"), "")
	s2, _ := NewSharedSession("https://sm.example.com/session?x=1", New("t2"), "")
	tests := []struct {
		a, b        Credentials
		same, equal bool
	}{
		{Password{"u", New("p")}, Password{"u", New("p2")}, true, false},
		{Password{"u", New("p")}, Password{"v", New("p")}, false, false},
		{Password{"u", New("p")}, Password{"u", New("p")}, true, true},
		{s1, s2, true, false},
		{c, c, true, true},
		{c, Password{Username: c.Identity(), Password: New("p")}, false, false},
		{nil, nil, true, true},
		{nil, s1, false, false},
	}
	for i, tt := range tests {
		if SameIdentity(tt.a, tt.b) != tt.same || Equal(tt.a, tt.b) != tt.equal {
			t.Errorf("%d: SameIdentity %v Equal %v, want %v %v", i, SameIdentity(tt.a, tt.b), Equal(tt.a, tt.b), tt.same, tt.equal)
		}
	}
}

func TestNewSharedSession(t *testing.T) {
	for _, tt := range []struct {
		url      string
		ok       bool
		insecure bool
	}{
		{"https://sm.example.com/session", true, false},
		{"HTTPS://sm.example.com:8443/s", true, false},
		{"http://10.0.0.1:18080/session", true, true},
		{"sm.example.com/session", false, false},
		{"ftp://sm.example.com/", false, false},
		{"https:///nohost", false, false},
		{"https://user:S3cret@sm.example.com/%zz", false, false},
	} {
		s, err := NewSharedSession(tt.url, New("tok"), "")
		if (err == nil) != tt.ok {
			t.Errorf("%q: err %v, want ok=%v", tt.url, err, tt.ok)
			continue
		}
		if err != nil && strings.Contains(err.Error(), "S3cret") {
			t.Errorf("%q: the error reveals the URL's password: %v", tt.url, err)
		}
		if err == nil && s.Insecure() != tt.insecure {
			t.Errorf("%q: Insecure() = %v", tt.url, s.Insecure())
		}
	}
	for in, want := range map[string]string{
		"https://u:p@sm.example.com/s?token=abc#frag": "https://sm.example.com/s",
		"admin:S3CRET@sm.example.com/x":               "[invalid URL]",
		"https:admin:S3CRET@host/x":                   "[invalid URL]",
		"sm.example.com/session":                      "[invalid URL]",
		"http://[::1]:8080/s":                         "http://[::1]:8080/s",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
	if _, err := NewSharedSession("https:admin:S3CRET@host/x", Value{}, ""); err == nil || strings.Contains(err.Error(), "S3CRET") {
		t.Errorf("an opaque URL: %v", err)
	}
}
