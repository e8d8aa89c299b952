package collectorxml

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
	return &res, govmomiInto(body, &res)
}

func govmomiInto(body []byte, res soap.HasFault) error {
	dec := xml.NewDecoder(bytes.NewReader(body))
	dec.TypeFunc = types.TypeFunc()
	return dec.Decode(&soap.Envelope{Body: res})
}

// decoding is one of the Decoder's methods with govmomi's decoding of
// the same response: what each returns, and govmomi's fault.
type decoding struct {
	name string
	ours func(d *Decoder, body []byte) (any, bool)
	// theirs returns govmomi's response and fault.
	theirs func(body []byte) (any, any, error)
}

var decodings = []decoding{
	{"WaitForUpdatesEx",
		func(d *Decoder, body []byte) (any, bool) { return d.Decode(body) },
		func(body []byte) (any, any, error) {
			var res methods.WaitForUpdatesExBody
			err := govmomiInto(body, &res)
			return res.Res, res.Fault_, err
		}},
	{"RetrievePropertiesEx",
		func(d *Decoder, body []byte) (any, bool) { return d.DecodeRetrieve(body) },
		func(body []byte) (any, any, error) {
			var res methods.RetrievePropertiesExBody
			err := govmomiInto(body, &res)
			return res.Res, res.Fault_, err
		}},
	{"ContinueRetrievePropertiesEx",
		func(d *Decoder, body []byte) (any, bool) { return d.DecodeContinueRetrieve(body) },
		func(body []byte) (any, any, error) {
			var res methods.ContinueRetrievePropertiesExBody
			err := govmomiInto(body, &res)
			return res.Res, res.Fault_, err
		}},
}

// decodingOf returns the decoding of the response body holds.
func decodingOf(body []byte) decoding {
	for _, dc := range decodings {
		if bytes.Contains(body, []byte("<"+dc.name+"Response ")) {
			return dc
		}
	}
	return decodings[0] // a fault: as the inventory's pages
}

// TestDecodeAgreesWithGovmomi: every fixture is decoded as govmomi's
// decoder decodes it, or declined.
func TestDecodeAgreesWithGovmomi(t *testing.T) {
	for _, tc := range []struct {
		file string
		ok   bool // decoded here, not declined
		// check looks at what was decoded, beyond agreeing with govmomi.
		check func(t *testing.T, res any)
	}{
		{file: "vcsim-identity.xml", ok: true, check: func(t *testing.T, res any) {
			set := res.(*types.WaitForUpdatesExResponse).Returnval
			if got := len(set.FilterSet[0].ObjectSet); got != 3 || set.Truncated == nil || !*set.Truncated {
				t.Errorf("%d objects, truncated %v; want 3, true", got, set.Truncated)
			}
		}},
		{file: "vcenter-identity.xml", ok: true, check: func(t *testing.T, res any) {
			objs := res.(*types.WaitForUpdatesExResponse).Returnval.FilterSet[0].ObjectSet
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
		{file: "vcenter-entities.xml", ok: true, check: func(t *testing.T, res any) {
			// Strings are kept once per response: by their escaped form.
			ch := res.(*types.WaitForUpdatesExResponse).Returnval.FilterSet[0].ObjectSet[0].ChangeSet
			if ch[0].Name != "a&lt;b" || ch[1].Name != "a<b" {
				t.Errorf("names %q and %q, want %q and %q", ch[0].Name, ch[1].Name, "a&lt;b", "a<b")
			}
		}},
		{file: "vcenter-none.xml", ok: true, check: func(t *testing.T, res any) {
			if r := res.(*types.WaitForUpdatesExResponse).Returnval; r != nil {
				t.Errorf("no change decoded as %#v", r)
			}
		}},
		{file: "vcenter-guestnet.xml", ok: true}, // a change of guest.net
		{file: "vcenter-details.xml", ok: true, check: func(t *testing.T, res any) {
			ch := res.(*types.WaitForUpdatesExResponse).Returnval.FilterSet[0].ObjectSet[0].ChangeSet
			nics := ch[9].Val.(types.ArrayOfGuestNicInfo).GuestNicInfo
			if len(nics) != 3 || len(nics[0].IpConfig.IpAddress) != 3 || nics[0].IpConfig.IpAddress[2].Lifetime == nil || nics[2].DeviceConfigId != -1 {
				t.Errorf("guest.net decoded as %#v", nics)
			}
			if got := ch[0].Val.(types.OptionValue).Value; got != "aW5zdGFuY2UtaWQ6IGs4cy13b3JrZXItMA==" {
				t.Errorf("guestinfo.metadata %#v", got)
			}
			if got := ch[3].Val; got != int32(16384) {
				t.Errorf("memoryMB %#v, want an int32", got)
			}
		}},
		// As recorded vCenters write guest.net: every item of an array of
		// data objects typed with its own type.
		{file: "vcenter-details-typed.xml", ok: true, check: func(t *testing.T, res any) {
			ch := res.(*types.WaitForUpdatesExResponse).Returnval.FilterSet[0].ObjectSet[0].ChangeSet
			nics := ch[9].Val.(types.ArrayOfGuestNicInfo).GuestNicInfo
			if len(nics) != 3 || len(nics[0].IpConfig.IpAddress) != 3 || nics[0].Network != "k8s-nodes" {
				t.Errorf("guest.net decoded as %#v", nics)
			}
		}},
		{file: "vcenter-retrieve.xml", ok: true, check: func(t *testing.T, res any) {
			r := res.(*types.RetrievePropertiesExResponse).Returnval
			if r.Token != "1" || len(r.Objects) != 2 || len(r.Objects[1].PropSet) != 3 {
				t.Errorf("decoded as %#v", r)
			}
		}},
		{file: "vcenter-continue.xml", ok: true},
		{file: "vcsim-extraconfig.xml", ok: true, check: func(t *testing.T, res any) {
			// The prefix declared on the val types the value inside it.
			o := res.(*types.RetrievePropertiesExResponse).Returnval.Objects[0].PropSet[0].Val.(types.OptionValue)
			if o.Value != "bmV0d29yazoge30=" {
				t.Errorf("OptionValue %#v", o)
			}
		}},
		{file: "vcsim-retrieve.xml", ok: true},
		{file: "vcsim-details.xml", ok: true, check: func(t *testing.T, res any) {
			// The simulator writes a quote as a character reference.
			ch := res.(*types.WaitForUpdatesExResponse).Returnval.FilterSet[0].ObjectSet[0].ChangeSet
			if got := ch[len(ch)-1].Name; got != `config.extraConfig["guestinfo.metadata"]` {
				t.Errorf("name %q", got)
			}
		}},
		{file: "vcenter-missing.xml"}, // a fault in a missing set
		{file: "vcenter-fault.xml"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			dc := decodingOf(body)
			want, _, err := dc.theirs(body)
			if err != nil {
				t.Fatalf("govmomi cannot decode the fixture: %v", err)
			}
			got, ok := dc.ours(New(types.TypeFunc()), body)
			if ok != tc.ok {
				t.Fatalf("decoded %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("differs from govmomi's decoder (-govmomi +here):\n%s", diff)
			}
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
}

// TestRecordedAnswers: pages of values real vCenters wrote
// (testdata/recorded, built by hack/recorded; SOURCES.md says whose) are
// decoded here, not declined, and as govmomi's decoder decodes them.
func TestRecordedAnswers(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "recorded", "*.xml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded answers: %v", err)
	}
	d := New(types.TypeFunc())
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			body, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			dc := decodingOf(body)
			want, fault, err := dc.theirs(body)
			if err != nil || (fault != nil && !reflect.ValueOf(fault).IsNil()) {
				t.Fatalf("govmomi cannot decode the page: %v %v", err, fault)
			}
			got, ok := dc.ours(d, body)
			if !ok {
				t.Fatalf("declined: a value as a real vCenter writes it falls back to govmomi")
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("differs from govmomi's decoder (-govmomi +here):\n%s", diff)
			}
		})
	}
}

// edit replaces from with to in a fixture.
type edit struct{ name, from, to string }

// declines checks that each edit of fixture is declined.
func declines(t *testing.T, fixture string, edits []edit) {
	body, err := os.ReadFile(filepath.Join("testdata", fixture))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range edits {
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

// TestDecodeDeclines: what is outside the subset is left to govmomi.
func TestDecodeDeclines(t *testing.T) {
	declines(t, "vcenter-identity.xml", []edit{
		{"comment", "<returnval>", "<returnval><!-- c -->"},
		{"CDATA", ">vm-1017<", "><![CDATA[vm-1017]]><"},
		{"reference to NUL", "k8s-worker-0", "k8s-worker&#0;0"},
		{"reference to a surrogate", "k8s-worker-0", "k8s-worker&#xD800;0"},
		{"reference with X", "k8s-worker-0", "k8s-worker&#X2D;0"},
		{"reference without digits", "k8s-worker-0", "k8s-worker&#;0"},
		{"reference without semicolon", "k8s-worker-0", "k8s-worker&#45 0"},
		{"reference too long", "k8s-worker-0", "k8s-worker&#0000000045;0"},
		{"carriage return", "k8s-worker-0", "k8s-worker\r0"},
		{"unknown entity", "&amp;", "&nbsp;"},
		{"unknown element", "<version>1</version>", "<version>1</version><future>x</future>"},
		{"attribute on a leaf", "<kind>enter</kind>", `<kind x="y">enter</kind>`},
		{"two versions", "<version>1</version>", "<version>1</version><version>2</version>"},
		{"xsd:double", `xsi:type="xsd:boolean">false`, `xsi:type="xsd:double">7`},
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
	})
}

// TestDecodeDeclinesDetails: in data objects too, what is outside the
// subset is left to govmomi.
func TestDecodeDeclinesDetails(t *testing.T) {
	declines(t, "vcenter-details.xml", []edit{
		{"unknown field", "<network>k8s-nodes</network>", "<network>k8s-nodes</network><future>x</future>"},
		{"a field twice", "<connected>true</connected><deviceConfigId>4000</deviceConfigId>", "<connected>true</connected><connected>false</connected><deviceConfigId>4000</deviceConfigId>"},
		{"attribute on a field", "<network>k8s-nodes</network>", `<network x="y">k8s-nodes</network>`},
		// An xsi:type naming the element's own type is read (vcenter-details-typed.xml); any other is not.
		{"another type on an array element", "<GuestNicInfo><network>k8s-nodes", `<GuestNicInfo xsi:type="GuestNicInfoFuture"><network>k8s-nodes`},
		{"a prefixed type on an array element", "<GuestNicInfo><network>k8s-nodes", `<GuestNicInfo xsi:type="vim25:GuestNicInfo"><network>k8s-nodes`},
		{"a type and another attribute", "<GuestNicInfo><network>k8s-nodes", `<GuestNicInfo xsi:type="GuestNicInfo" x="y"><network>k8s-nodes`},
		{"a type with an undeclared prefix", "<GuestNicInfo><network>k8s-nodes", `<GuestNicInfo q:type="GuestNicInfo"><network>k8s-nodes`},
		{"a type on a leaf", "<network>k8s-nodes</network>", `<network xsi:type="xsd:string">k8s-nodes</network>`},
		// The fast path reads only the value types the inventory asks for (valueTypes).
		{"an enum the inventory does not read", `xsi:type="VirtualMachinePowerState"`, `xsi:type="VirtualMachineFaultToleranceState"`},
		{"integer with a plus", "<deviceConfigId>4000</deviceConfigId>", "<deviceConfigId>+4000</deviceConfigId>"},
		{"integer with space", "<deviceConfigId>4000</deviceConfigId>", "<deviceConfigId> 4000</deviceConfigId>"},
		{"empty integer", "<deviceConfigId>4000</deviceConfigId>", "<deviceConfigId></deviceConfigId>"},
		{"integer out of range", `xsi:type="xsd:int">16384`, `xsi:type="xsd:int">3000000000`},
		{"boolean field spelled 1", "<connected>true</connected>", "<connected>1</connected>"},
		{"text among fields", "<network>k8s-nodes</network><ipAddress>", "<network>k8s-nodes</network>x<ipAddress>"},
		{"a Base interface", "<deviceConfigId>4000</deviceConfigId><dnsConfig>", `<deviceConfigId>4000</deviceConfigId><netBIOSConfig xsi:type="NetBIOSConfigInfo"><mode>disabled</mode></netBIOSConfig><dnsConfig>`},
		{"any without a type", `<value xsi:type="xsd:string">base64</value>`, `<value>base64</value>`},
		{"bad time", "2026-12-01T10:00:00Z", "yesterday"},
		{"xsd:dateTime value", `xsi:type="xsd:string">ubuntu64Guest`, `xsi:type="xsd:dateTime">2026-12-01T10:00:00Z`},
		{"unknown type", `xsi:type="OptionValue"><key>guestinfo.metadata<`, `xsi:type="FutureOption"><key>guestinfo.metadata<`},
		{"element in a leaf", "<network>k8s-nodes</network>", "<network><b>k8s</b></network>"},
		// xsi is rebound on the value: the decoder finds no type on the
		// value inside and leaves it nil.
		{"prefix rebound on a value", `<val xsi:type="OptionValue"><key>guestinfo.metadata.encoding</key>`,
			`<val xmlns:xsi="urn:other" xmlns:x="http://www.w3.org/2001/XMLSchema-instance" x:type="OptionValue"><key>guestinfo.metadata.encoding</key>`},
		{"objects too deep", `<value xsi:type="xsd:string">base64</value>`,
			strings.Repeat(`<value xsi:type="OptionValue"><key>k</key>`, 40) + `<value xsi:type="xsd:string">base64</value>` + strings.Repeat(`</value>`, 40)},
	})
}

// FuzzDecode: whatever Decode, DecodeRetrieve or DecodeContinueRetrieve
// accepts, govmomi's decoder decodes to the same response, without a
// fault.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.xml"))
	recorded, _ := filepath.Glob(filepath.Join("testdata", "recorded", "*.xml"))
	for _, file := range append(files, recorded...) {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	d := New(types.TypeFunc())
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, dc := range decodings {
			got, ok := dc.ours(d, body)
			if !ok {
				continue
			}
			want, fault, err := dc.theirs(body)
			switch {
			case err != nil:
				t.Fatalf("%s: decoded what govmomi rejects (%v): %#v", dc.name, err, got)
			case fault != nil && !reflect.ValueOf(fault).IsNil():
				t.Fatalf("%s: decoded a fault as %#v", dc.name, got)
			case !reflect.DeepEqual(want, got):
				t.Fatalf("%s: differs from govmomi's decoder (-govmomi +here):\n%s", dc.name, cmp.Diff(want, got))
			}
		}
	})
}
