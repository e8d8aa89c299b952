package updateset

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
	"github.com/vmware/govmomi/vim25/xml"
)

// govmomi decodes body as the SOAP client does: the oracle.
func govmomi(body []byte) (*methods.WaitForUpdatesExBody, error) {
	var res methods.WaitForUpdatesExBody
	dec := xml.NewDecoder(bytes.NewReader(body))
	dec.TypeFunc = types.TypeFunc()
	err := dec.Decode(&soap.Envelope{Body: &res})
	return &res, err
}

// TestDecodeAgreesWithGovmomi: every fixture is decoded as govmomi's
// decoder decodes it, or declined.
func TestDecodeAgreesWithGovmomi(t *testing.T) {
	for _, tc := range []struct {
		file string
		ok   bool // decoded here, not declined
		// check looks at what was decoded, beyond agreeing with govmomi.
		check func(t *testing.T, res *types.WaitForUpdatesExResponse)
	}{
		{file: "vcsim-identity.xml", ok: true, check: func(t *testing.T, res *types.WaitForUpdatesExResponse) {
			set := res.Returnval
			if got := len(set.FilterSet[0].ObjectSet); got != 3 || set.Truncated == nil || !*set.Truncated {
				t.Errorf("%d objects, truncated %v; want 3, true", got, set.Truncated)
			}
		}},
		{file: "vcenter-identity.xml", ok: true, check: func(t *testing.T, res *types.WaitForUpdatesExResponse) {
			objs := res.Returnval.FilterSet[0].ObjectSet
			if got := objs[0].ChangeSet[2].Val; got != `k8s-worker-0 & <test> "q" 'a' ünï` {
				t.Errorf("name %q: entities or UTF-8 not decoded", got)
			}
			if got := objs[0].ChangeSet[3].Val; got != types.VirtualMachineConnectionStateConnected {
				t.Errorf("connection state %#v, want the enum", got)
			}
			if got := objs[1].ChangeSet[1].Val; got != nil {
				t.Errorf("unset config.uuid decoded as %#v", got)
			}
			want := types.ManagedObjectReference{Type: "ClusterComputeResource", Value: "domain-c9"}
			if got := objs[2].ChangeSet[1].Val; got != want {
				t.Errorf("parent %#v, want %#v", got, want)
			}
		}},
		{file: "vcenter-modify.xml", ok: true},
		{file: "vcenter-entities.xml", ok: true, check: func(t *testing.T, res *types.WaitForUpdatesExResponse) {
			// Strings are kept once per response: by their escaped form.
			ch := res.Returnval.FilterSet[0].ObjectSet[0].ChangeSet
			if ch[0].Name != "a&lt;b" || ch[1].Name != "a<b" {
				t.Errorf("names %q and %q, want %q and %q", ch[0].Name, ch[1].Name, "a&lt;b", "a<b")
			}
		}},
		{file: "vcenter-none.xml", ok: true, check: func(t *testing.T, res *types.WaitForUpdatesExResponse) {
			if res.Returnval != nil {
				t.Errorf("no change decoded as %#v", res.Returnval)
			}
		}},
		{file: "vcenter-guestnet.xml"}, // a complex value
		{file: "vcenter-missing.xml"},  // a fault in a missing set
		{file: "vcenter-fault.xml"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			want, err := govmomi(body)
			if err != nil {
				t.Fatalf("govmomi cannot decode the fixture: %v", err)
			}
			got, ok := New(types.TypeFunc()).Decode(body)
			if ok != tc.ok {
				t.Fatalf("decoded %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			if diff := cmp.Diff(want.Res, got); diff != "" {
				t.Errorf("differs from govmomi's decoder (-govmomi +here):\n%s", diff)
			}
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
}

// TestDecodeDeclines: what is outside the subset is left to govmomi.
func TestDecodeDeclines(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("testdata", "vcenter-identity.xml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, from, to string }{
		{"comment", "<returnval>", "<returnval><!-- c -->"},
		{"CDATA", ">vm-1017<", "><![CDATA[vm-1017]]><"},
		{"character reference", "k8s-worker-0", "k8s-worker&#45;0"},
		{"carriage return", "k8s-worker-0", "k8s-worker\r0"},
		{"unknown entity", "&amp;", "&nbsp;"},
		{"unknown element", "<version>1</version>", "<version>1</version><future>x</future>"},
		{"attribute on a leaf", "<kind>enter</kind>", `<kind x="y">enter</kind>`},
		{"two versions", "<version>1</version>", "<version>1</version><version>2</version>"},
		{"xsd:int", `xsi:type="xsd:boolean">false`, `xsi:type="xsd:int">7`},
		{"other encoding", `encoding="UTF-8"`, `encoding="ISO-8859-1"`},
		{"a default namespace", `<val xsi:type="xsd:string">inaccessible`, `<val xmlns="urn:other" xsi:type="xsd:string">inaccessible`},
		{"type prefix not declared", `<val xsi:type="xsd:string">inaccessible`, `<val q:type="xsd:string">inaccessible`},
		{"prefixed vSphere type", `xsi:type="VirtualMachineConnectionState">connected`, `xsi:type="vim25:VirtualMachineConnectionState">connected`},
		{"not an enum", `xsi:type="VirtualMachineConnectionState">connected`, `xsi:type="GuestNicInfo">connected`},
		{"boolean spelled 1", `xsi:type="xsd:boolean">false`, `xsi:type="xsd:boolean">0`},
		{"trailing data", "</soapenv:Envelope>", "</soapenv:Envelope><x/>"},
		{"truncated body", "</soapenv:Envelope>", "</soapenv:Env"},
		{"prefixed element", "<returnval>", "<soapenv:returnval>"},
		{"xml prefix declared", `<val xsi:type="xsd:string">inaccessible`, `<val xmlns:xml="http://www.w3.org/2001/XMLSchema-instance" xml:type="xsd:string">inaccessible`},
		{"xmlns:type on a reference", `<val type="ClusterComputeResource"`, `<val xmlns:type="urn:x" type="ClusterComputeResource"`},
		{"xmlns:serverGuid on a reference", `<val type="ClusterComputeResource"`, `<val xmlns:serverGuid="g" type="ClusterComputeResource"`},
		{"envelope prefix xml", "<soapenv:Envelope xmlns:soapenc", "<soapenv:Envelope xmlns:xml=\"urn:x\" xmlns:soapenc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := strings.Replace(string(body), tc.from, tc.to, 1)
			if in == string(body) {
				t.Fatalf("%q is not in the fixture", tc.from)
			}
			if res, ok := New(types.TypeFunc()).Decode([]byte(in)); ok {
				t.Errorf("decoded %#v, want it declined", res)
			}
		})
	}
}

// FuzzDecode: whatever Decode accepts, govmomi's decoder decodes to the
// same response, without a fault.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.xml"))
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	d := New(types.TypeFunc())
	f.Fuzz(func(t *testing.T, body []byte) {
		got, ok := d.Decode(body)
		if !ok {
			return
		}
		want, err := govmomi(body)
		switch {
		case err != nil:
			t.Fatalf("decoded what govmomi rejects (%v): %#v", err, got)
		case want.Fault_ != nil:
			t.Fatalf("decoded a fault as %#v", got)
		case !reflect.DeepEqual(want.Res, got):
			t.Fatalf("differs from govmomi's decoder (-govmomi +here):\n%s", cmp.Diff(want.Res, got))
		}
	})
}
