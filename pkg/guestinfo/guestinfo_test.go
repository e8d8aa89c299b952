package guestinfo

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func gz(s string) string {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	_, _ = w.Write([]byte(s))
	_ = w.Close()
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

// network is cloud-init network config as CAPV writes it.
const network = `version: 2
ethernets:
  id1:
    addresses:
    - 192.168.10.5/24
  id0:
    match:
      macaddress: "00:50:56:a0:00:01"
    set-name: eth0
    addresses:
    - 10.20.0.15/24
    - fd00:20:0:0::15/64
    gateway4: 10.20.0.1
`

func TestStaticOrder(t *testing.T) {
	indented := "  " + strings.ReplaceAll(strings.TrimSuffix(network, "\n"), "\n", "\n  ") + "\n"
	plain := "instance-id: vm\nlocal-hostname: vm\nnetwork:\n" + indented
	cases := []struct {
		name, metadata, encoding string
		want                     map[string]int
		err                      string
	}{
		{name: "absent"},
		{name: "not base64-encoded: the reference reads no other", metadata: plain},
		{name: "base64", metadata: b64(plain), encoding: "base64",
			want: map[string]int{"10.20.0.15": 0, "fd00:20::15": 1, "192.168.10.5": 2}},
		{name: "network itself base64", metadata: b64("network: " + b64(network) + "\nnetwork.encoding: base64\n"), encoding: "base64",
			want: map[string]int{"10.20.0.15": 0, "fd00:20::15": 1, "192.168.10.5": 2}},
		{name: "network gzip+base64", metadata: b64("network: " + gz(network) + "\nnetwork.encoding: gzip+base64\n"), encoding: "base64",
			want: map[string]int{"10.20.0.15": 0, "fd00:20::15": 1, "192.168.10.5": 2}},
		{name: "no network", metadata: b64("instance-id: vm\n"), encoding: "base64", want: map[string]int{}},
		{name: "not base64", metadata: "%%", encoding: "base64", err: "not base64"},
		{name: "not YAML", metadata: b64("network: [unclosed"), encoding: "base64", err: "guestinfo.metadata"},
		{name: "a repeated address ranks at its last place, as in the reference", metadata: b64("network:\n  ethernets:\n    id0:\n      addresses: [10.0.0.1/24, 10.0.0.2/24, 10.0.0.1/24]\n"), encoding: "base64",
			want: map[string]int{"10.0.0.1": 2, "10.0.0.2": 1}},
		{name: "set-name not a string fails, as in the reference", metadata: b64("network:\n  ethernets:\n    id0:\n      set-name: [eth0]\n      addresses: [10.0.0.2/24]\n"), encoding: "base64", err: "guestinfo.metadata"},
		{name: "network not gzip", metadata: b64("network: " + b64("x") + "\nnetwork.encoding: gz+b64\n"), encoding: "base64", err: "network (gz+b64)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := StaticOrder(tc.metadata, tc.encoding)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// FuzzStaticOrder: any metadata is read or refused, never a panic, and
// only base64-encoded metadata yields static addresses.
func FuzzStaticOrder(f *testing.F) {
	f.Add(b64("network:\n  ethernets:\n    id0:\n      addresses: [10.0.0.1/24]\n"), "base64")
	f.Add(b64("network: "+gz(network)+"\nnetwork.encoding: gzip+base64\n"), "base64")
	f.Add("network: {}", "")
	f.Fuzz(func(t *testing.T, metadata, encoding string) {
		got, err := StaticOrder(metadata, encoding)
		if (encoding != "base64" || metadata == "") && (got != nil || err != nil) {
			t.Fatalf("encoding %q: %v, %v", encoding, got, err)
		}
		for a, i := range got {
			if i < 0 { // a repeated address takes the count so far, which may reach len(got)
				t.Fatalf("rank %d of %s", i, a)
			}
		}
	})
}
