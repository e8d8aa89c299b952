package credentials

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/secret"
)

func creds(u, p string) secret.Credentials {
	return secret.Password{Username: u, Password: secret.New(p)}
}

// username and password read password credentials ("" for other modes).
func username(c secret.Credentials) string {
	p, _ := c.(secret.Password)
	return p.Username
}

func password(c secret.Credentials) string {
	p, _ := c.(secret.Password)
	return p.Password.Reveal()
}

func TestParseData(t *testing.T) {
	tests := []dataCase{
		{
			name: "dotted keys for several servers",
			data: map[string]string{
				"vc-a.example.com.username": "admin@vsphere.local", "vc-a.example.com.password": "pa=ss\n",
				"10.0.0.5.username": "u", "10.0.0.5.password": "p",
			},
			want: Set{"vc-a.example.com": creds("admin@vsphere.local", "pa=ss"), "10.0.0.5": creds("u", "p")},
		},
		{
			name: "IPv6-safe keys",
			data: map[string]string{"server_1": "fd00::5", "username_1": "u", "password_1": "p", "server_b": "vc-b", "username_b": "ub", "password_b": "pb"},
			want: Set{"fd00::5": creds("u", "p"), "vc-b": creds("ub", "pb")},
		},
		{
			name:     "unknown keys are ignored with a warning",
			data:     map[string]string{"vc.username": "u", "vc.password": "p", "ca.crt": "x", "note": "y"},
			want:     Set{"vc": creds("u", "p")},
			warnings: []string{`"ca.crt" ignored`, `"note" ignored`},
		},
		{
			name: "a username without password is an error naming the key; others survive",
			data: map[string]string{"vc-a.username": "u", "vc-b.username": "u", "vc-b.password": "p", "vc-c.password": "p"},
			want: Set{"vc-b": creds("u", "p")},
			errs: []string{`key "vc-a.username" has no matching password key`, `key "vc-c.password" has no matching username key`},
		},
		{
			name: "id keys without their server",
			data: map[string]string{"username_9": "u", "password_9": "p", "server_3": "vc3"},
			want: Set{},
			errs: []string{`"username_9": no server_9`, `"password_9": no server_9`, `"server_3": no username_3`},
		},
		{
			name: "empty values",
			data: map[string]string{"vc.username": "", "vc.password": "p", "server_1": " "},
			want: Set{},
			errs: []string{`"vc.username": empty username`, `"server_1": empty server name`},
		},
	}
	tests = append(tests, modeCases(t)...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := map[string][]byte{}
			for k, v := range tt.data {
				data[k] = []byte(v)
			}
			got, warnings, err := ParseData(data)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("set (-want +got):\n%s", diff)
			}
			if len(warnings) != len(tt.warnings) {
				t.Errorf("warnings = %q, want %d", warnings, len(tt.warnings))
			}
			for i := range min(len(warnings), len(tt.warnings)) {
				if !strings.Contains(warnings[i], tt.warnings[i]) {
					t.Errorf("warning %q lacks %q", warnings[i], tt.warnings[i])
				}
			}
			if len(tt.errs) == 0 && err != nil {
				t.Errorf("unexpected error: %v", err)
			}
			for _, e := range tt.errs {
				if err == nil || !strings.Contains(err.Error(), e) {
					t.Errorf("error %v lacks %q", err, e)
				}
			}
			// No value ever appears in warnings or errors.
			text := strings.Join(warnings, "\n") + fmt.Sprint(err) + fmt.Sprintf("%+v %#v", got, got)
			for k, v := range tt.data {
				if strings.Contains(k, "password") && len(strings.TrimSpace(v)) > 0 && strings.Contains(text, strings.TrimSpace(v)) && len(v) > 1 {
					t.Errorf("output reveals the value of %s: %s", k, text)
				}
			}
		})
	}
}

type dataCase struct {
	name     string
	data     map[string]string
	want     Set
	warnings []string // substrings, one per warning
	errs     []string // substrings that must appear in the error
}

func testdata(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "secret", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// modeCases: the reference CCM's keys for shared sessions and its rule for
// certificates.
func modeCases(t testing.TB) []dataCase {
	cert, key, other := testdata(t, "solution-user.crt"), testdata(t, "solution-user.key"), testdata(t, "other.key")
	// Values are read without their final line break, as the reference reads them.
	c, err := secret.NewCertificate(strings.TrimRight(cert, "\n"), secret.New(strings.TrimRight(key, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	shared := func(url, token string) secret.Credentials {
		s, err := secret.NewSharedSession(url, secret.New(token), "")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	return []dataCase{
		{
			name: "a shared session alone (no username, no password)",
			data: map[string]string{"vc1.vc-session-manager-url": "https://sm.example.com/session\n", "vc1.vc-session-manager-token": "tok\n"},
			want: Set{"vc1": shared("https://sm.example.com/session", "tok")},
		},
		{
			name: "a shared session without token (the service-account token is sent)",
			data: map[string]string{"vc1.vc-session-manager-url": "https://sm.example.com/session"},
			want: Set{"vc1": shared("https://sm.example.com/session", "")},
		},
		{
			name:     "a shared session wins over username and password, as in the reference",
			data:     map[string]string{"vc1.vc-session-manager-url": "https://sm.example.com/session", "vc1.username": "u", "vc1.password": "p"},
			want:     Set{"vc1": shared("https://sm.example.com/session", "")},
			warnings: []string{"its username and password are not used"},
		},
		{
			name:     "a plain http session manager works, with a warning",
			data:     map[string]string{"vc1.vc-session-manager-url": "http://sm.example.com:18080/session", "vc1.vc-session-manager-token": "tok"},
			want:     Set{"vc1": shared("http://sm.example.com:18080/session", "tok")},
			warnings: []string{"travel in clear"},
		},
		{
			name:     "an empty URL beside a username and password: the password, as in the reference",
			data:     map[string]string{"vc1.vc-session-manager-url": "", "vc1.vc-session-manager-token": "tok", "vc1.username": "u", "vc1.password": "p"},
			want:     Set{"vc1": creds("u", "p")},
			warnings: []string{`"vc1.vc-session-manager-url" is empty, so the username and password are used`},
		},
		{
			name: "an empty URL alone",
			data: map[string]string{"vc1.vc-session-manager-url": ""},
			want: Set{},
			errs: []string{`key "vc1.vc-session-manager-url": empty session manager URL`},
		},
		{
			name: "a key with damaged armour as the username: refused, never a user name",
			data: map[string]string{"vc1.username": strings.ReplaceAll(key, "\n", " "), "vc1.password": "p"},
			want: Set{},
			errs: []string{"the username holds PEM text that is not a certificate"},
		},
		{
			name: "a token without URL",
			data: map[string]string{"vc1.vc-session-manager-token": "tok-S3cret"},
			want: Set{},
			errs: []string{`key "vc1.vc-session-manager-token" has no matching vc1.vc-session-manager-url key`},
		},
		{
			name: "a URL that is not http(s)",
			data: map[string]string{"vc1.vc-session-manager-url": "sm.example.com/session"},
			want: Set{},
			errs: []string{`key "vc1.vc-session-manager-url": invalid session manager URL`},
		},
		{
			name: "a certificate as username and its key as password",
			data: map[string]string{"vc1.username": cert, "vc1.password": key},
			want: Set{"vc1": c},
		},
		{
			name: "a certificate with the key of another",
			data: map[string]string{"vc1.username": cert, "vc1.password": other},
			want: Set{},
			errs: []string{`server "vc1", keys "vc1.username" and "vc1.password"`, "does not match"},
		},
		{
			name: "a private key as the password of a user: refused, never sent",
			data: map[string]string{"vc1.username": "admin@vsphere.local", "vc1.password": key, "vc2.username": "u", "vc2.password": "p"},
			want: Set{"vc2": creds("u", "p")},
			errs: []string{`server "vc1", keys "vc1.username" and "vc1.password": a PEM private key is given as a password`},
		},
		{
			name: "IPv6-safe keys with a certificate",
			data: map[string]string{"server_1": "fd00::1", "username_1": cert, "password_1": key},
			want: Set{"fd00::1": c},
		},
	}
}

func FuzzParseData(f *testing.F) {
	f.Add("vc.username", "u", "vc.password", "p")
	f.Add("server_1", "fd00::1", "username_1", "u")
	f.Add("vc.vc-session-manager-url", "https://sm/s?t=Tok3n-in-query", "vc.vc-session-manager-token", "Bear3r-t0ken")
	f.Add("vc.username", testdata(f, "solution-user.crt"), "vc.password", testdata(f, "other.key"))
	f.Add("vc.username", "admin", "vc.password", testdata(f, "solution-user.key"))
	f.Add("vc.username", testdata(f, "solution-user.key"), "vc.password", testdata(f, "solution-user.crt"))
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		set, warnings, err := ParseData(map[string][]byte{k1: []byte(v1), k2: []byte(v2)})
		for server, c := range set {
			if server == "" || c == nil || c.Identity() == "" {
				t.Fatalf("incomplete entry %q: %+v", server, c)
			}
		}
		// A password value never appears in errors or warnings (unless it
		// also appears in a key or the other value, which may be printed).
		text := fmt.Sprint(err, warnings)
		for _, kv := range [][2]string{{k1, v1}, {k2, v2}} {
			k, v := kv[0], strings.TrimRight(kv[1], "\r\n")
			isPassword := strings.HasSuffix(k, ".password") || strings.HasPrefix(k, "password_") || strings.HasSuffix(k, ".vc-session-manager-token")
			// A private key given under any key: none of its lines is printed.
			if strings.Contains(v, "PRIVATE KEY") {
				for _, l := range strings.Split(v, "\n") {
					if len(l) >= 16 && !strings.HasPrefix(l, "-----") && !strings.Contains(k1+k2, l) && strings.Contains(text, l) {
						t.Fatalf("output reveals a line of the private key under %q: %s", k, text)
					}
				}
			}
			if !isPassword || len(v) < 6 || strings.Contains(k1+k2, v) || strings.Contains(v1+v2, v+v) {
				continue
			}
			if other := v1 + v2; strings.Count(other, v) > 1 {
				continue
			}
			if strings.Contains(text, v) {
				t.Fatalf("output reveals the value of %q: %s", k, text)
			}
		}
	})
}
