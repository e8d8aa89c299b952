package config

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/secret"
)

const sentinel = "Sentinel-Zq9x=Kp!"

// No formatted, marshalled, encoded or error output of a config contains
// the password, for both formats and for the environment.
func TestPasswordNeverPrinted(t *testing.T) {
	inputs := map[string]string{
		"yaml":        "global:\n  password: " + sentinel + "\n  user: u\nvcenter:\n  a:\n    server: vc.example.com\n    password: " + sentinel + "\n",
		"ini":         "[Global]\nuser = u\npassword = \"" + sentinel + "\"\n[VirtualCenter \"vc.example.com\"]\n",
		"yaml-broken": "global:\n  password: " + sentinel + "\n  user: u\n  port: nope\nvcenter:\n  a:\n    server: https://x\n    pasword: " + sentinel + "\n",
		"ini-broken":  "[Global]\npassword = \"" + sentinel + "\"\npasword = " + sentinel + "\n[VirtualCenter \"\"]\n",
	}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			cfg, warnings, err := Parse("cfg", []byte(in), Options{Env: []string{"VSPHERE_PASSWORD=" + sentinel}})
			var outputs []string
			for _, w := range warnings {
				outputs = append(outputs, w.Error())
			}
			if err != nil {
				outputs = append(outputs, err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err))
			}
			if cfg != nil {
				js, _ := json.Marshal(cfg)
				enc, _, notes, encErr := Encode(cfg, EncodeOptions{})
				if encErr != nil {
					t.Fatal(encErr)
				}
				outputs = append(outputs, cfg.String(), fmt.Sprintf("%s", cfg), fmt.Sprintf("%v", *cfg), fmt.Sprintf("%+v", *cfg), fmt.Sprintf("%v", cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg),
					fmt.Sprint(cfg.VCenters), fmt.Sprintf("%v", cfg.VCenters[0].Credentials), string(js), string(enc), strings.Join(notes, "\n"))
				if inlinePassword(cfg.VCenters[0].Credentials) == "" {
					t.Fatal("password not parsed")
				}
			}
			for _, out := range outputs {
				if strings.Contains(out, "Zq9x") || strings.Contains(out, fmt.Sprintf("%x", sentinel)) {
					t.Errorf("output reveals the password:\n%s", out)
				}
			}
		})
	}
}

// TestKeysShownOnlyWhenKnown: an unknown key is named in an error only
// when it is a known key up to case, separators or format; a near miss
// by edit distance (a secret typed as a key can be one) gets the
// suggestion without the key. A control character in a name is shown as
// a code point, never with the name.
func TestKeysShownOnlyWhenKnown(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		shown    []string // must appear
		hidden   []string // must not
	}{
		{"case and separators", "[Global]\ninsecure_flag = true\n", []string{`"insecure_flag"`, "did you mean insecure-flag?"}, nil},
		{"other format", "[Global]\ncaFile = /x\n", []string{`"caFile"`, "did you mean ca-file? (caFile is the YAML spelling)"}, nil},
		{"written with a value", "global:\n  frobnicate: 1\n", []string{`"frobnicate"`, "valid keys:"}, nil},
		{"written with a value, INI", "[Global]\nservr = vc\n", []string{`"servr"`, "did you mean server?"}, nil},
		{"like a secret's name", "global:\n  passw0rdd: 1\n", []string{"did you mean password?", "not shown"}, []string{"passw0rdd"}},
		{"like a secret's name, INI", "[Global]\npasswrd = 1\n", []string{"did you mean password?", "not shown"}, []string{"passwrd"}},
		{"glued to its key, INI", "[Global]\npasswordHunter2 = 1\n", []string{"not shown"}, []string{"Hunter2"}},
		{"no value, INI", "[Global]\nHunter2Zq\n", []string{"not shown"}, []string{"Hunter2Zq"}},
		{"no value, YAML", "global:\n  Hunter2Zq:\n", []string{"not shown"}, []string{"Hunter2Zq"}},
		{"control character in a name, INI", "[Global]\nuser = u\npassword = p\n[VirtualCenter \"Zq9\x01x\"]\n", []string{"U+0001"}, []string{"Zq9", `\x01`, "\x01"}},
		{"control character in a name, YAML", "vcenter:\n  \"Zq9\\u0001x\":\n    server: a\n", []string{"U+0001"}, []string{"Zq9", `\x01`, `\u0001`, "\x01"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Parse("cfg", []byte(tc.in), Options{})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.shown {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			for _, w := range tc.hidden {
				if strings.Contains(err.Error(), w) {
					t.Errorf("error shows %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestInlineModeInheritance: a vCenter inherits global's inline credential
// fields of the mode it uses; setting fields of one mode itself, it
// inherits none of another, and a session-manager token only comes with
// its URL.
func TestInlineModeInheritance(t *testing.T) {
	const head = "global:\n  user: admin@vsphere.local\n  password: pa55\n  sessionManagerURL: https://sm-a.example.com/s\n  sessionManagerToken: token-for-a\n"
	tests := []struct {
		name, vc string
		check    func(t *testing.T, c secret.Credentials)
	}{
		{"nothing of its own: global's first complete mode is an error of mixed modes", "", nil},
		{"its own session manager: global's user and token are not used", "    sessionManagerURL: https://sm-b.example.com/s\n", func(t *testing.T, c secret.Credentials) {
			s, ok := c.(secret.SharedSession)
			if !ok || s.URL != "https://sm-b.example.com/s" || s.Token.IsSet() {
				t.Errorf("got %#v, want sm-b without global's token", c)
			}
		}},
		{"its own password: global's user, not its session manager", "    password: own-pass\n", func(t *testing.T, c secret.Credentials) {
			p, ok := c.(secret.Password)
			if !ok || p.Username != "admin@vsphere.local" || p.Password.Reveal() != "own-pass" {
				t.Errorf("got %#v, want global's user with its own password", c)
			}
		}},
		{"its own token: global's URL with it", "    sessionManagerToken: own-token\n", func(t *testing.T, c secret.Credentials) {
			s, ok := c.(secret.SharedSession)
			if !ok || s.URL != "https://sm-a.example.com/s" || s.Token.Reveal() != "own-token" {
				t.Errorf("got %#v, want sm-a with its own token", c)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, _, err := Parse("t.yaml", []byte(head+"vcenter:\n  a:\n    server: vc.example.com\n"+tt.vc), Options{})
			if tt.check == nil {
				if err == nil || !strings.Contains(err.Error(), "mix modes") {
					t.Fatalf("err = %v, want the mixed modes named", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, cfg.VCenters[0].Credentials.Inline)
		})
	}
}

// A private key pasted into the certificate field is refused at that
// field, with what to do, and without showing the key.
func TestCertificateFieldWithKey(t *testing.T) {
	crt, err := os.ReadFile("../secret/testdata/solution-user.crt")
	if err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile("../secret/testdata/solution-user.key")
	if err != nil {
		t.Fatal(err)
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	text := "vcenter:\n  a:\n    server: vc-a.example.com\n    certificate: " + q(string(crt)+string(key)) + "\n    privateKey: " + q(string(key)) + "\n"
	_, _, err = Parse("c.yaml", []byte(text), Options{})
	errs, ok := AsErrors(err)
	if !ok || len(errs) != 1 || errs[0].Field != `vcenter["a"].certificate` || !strings.Contains(errs[0].Message, "holds a private key block") ||
		strings.Contains(err.Error(), strings.Split(string(key), "\n")[1]) {
		t.Fatalf("%v", err)
	}
}
