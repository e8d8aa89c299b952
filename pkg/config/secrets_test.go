package config

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
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
				enc, notes, encErr := Encode(cfg)
				if encErr != nil {
					t.Fatal(encErr)
				}
				outputs = append(outputs, cfg.String(), fmt.Sprintf("%s", cfg), fmt.Sprintf("%v", *cfg), fmt.Sprintf("%+v", *cfg), fmt.Sprintf("%v", cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg),
					fmt.Sprint(cfg.VCenters), fmt.Sprintf("%v", cfg.VCenters[0].Credentials), string(js), string(enc), strings.Join(notes, "\n"))
				if !cfg.VCenters[0].Credentials.Password.IsSet() {
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
