package collectorxml

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vmware/govmomi/vim25/types"
)

// The envelope around a response, as vCenter writes it.
const (
	envelopeHead = `<?xml version="1.0" encoding="UTF-8"?>
<soapenv:Envelope xmlns:soapenc="http://schemas.xmlsoap.org/soap/encoding/"
 xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"
 xmlns:xsd="http://www.w3.org/2001/XMLSchema"
 xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<soapenv:Body>
`
	envelopeTail = `
</soapenv:Body>
</soapenv:Envelope>
`
)

// page is a full-read page of n VMs' identities as vCenter writes it.
func page(n int) []byte {
	var b strings.Builder
	b.WriteString(envelopeHead + `<WaitForUpdatesExResponse xmlns="urn:vim25"><returnval><version>1</version><filterSet><filter type="PropertyFilter">session[521da002-3565-aed7-bfc9-a37573136c0e]52b39f40-3106-c12b-715c-bc09e1862cbf</filter>`)
	for i := range n {
		fmt.Fprintf(&b, `<objectSet><kind>enter</kind><obj type="VirtualMachine">vm-%d</obj>`+
			`<changeSet><name>config.template</name><op>assign</op><val xsi:type="xsd:boolean">false</val></changeSet>`+
			`<changeSet><name>config.uuid</name><op>assign</op><val xsi:type="xsd:string">4213a5c0-6f1e-7b1a-2ef9-%012x</val></changeSet>`+
			`<changeSet><name>name</name><op>assign</op><val xsi:type="xsd:string">k8s-worker-%d</val></changeSet>`+
			`<changeSet><name>runtime.connectionState</name><op>assign</op><val xsi:type="VirtualMachineConnectionState">connected</val></changeSet></objectSet>`,
			1000+i, i, i)
	}
	b.WriteString(`</filterSet><truncated>true</truncated></returnval></WaitForUpdatesExResponse>` + envelopeTail)
	return []byte(b.String())
}

// detailsRead is a direct read of n VMs' details (vmProperties of the
// inventory) as vCenter writes it: guest.net with two addresses and
// their ipConfig, the two extraConfig entries, CPUs and memory.
func detailsRead(n int) []byte {
	var b strings.Builder
	b.WriteString(envelopeHead + `<RetrievePropertiesExResponse xmlns="urn:vim25"><returnval>`)
	for i := range n {
		fmt.Fprintf(&b, `<objects><obj type="VirtualMachine">vm-%d</obj>`+
			`<propSet><name>config.extraConfig["guestinfo.metadata"]</name><val xsi:type="OptionValue"><key>guestinfo.metadata</key><value xsi:type="xsd:string">bmV0d29yazoge30=</value></val></propSet>`+
			`<propSet><name>config.extraConfig["guestinfo.metadata.encoding"]</name><val xsi:type="OptionValue"><key>guestinfo.metadata.encoding</key><value xsi:type="xsd:string">base64</value></val></propSet>`+
			`<propSet><name>config.guestId</name><val xsi:type="xsd:string">ubuntu64Guest</val></propSet>`+
			`<propSet><name>config.hardware.memoryMB</name><val xsi:type="xsd:int">16384</val></propSet>`+
			`<propSet><name>config.hardware.numCPU</name><val xsi:type="xsd:int">4</val></propSet>`+
			`<propSet><name>config.instanceUuid</name><val xsi:type="xsd:string">5012d3a4-8f1e-6c2b-9d40-%012x</val></propSet>`+
			`<propSet><name>config.template</name><val xsi:type="xsd:boolean">false</val></propSet>`+
			`<propSet><name>config.uuid</name><val xsi:type="xsd:string">4213a5c0-6f1e-7b1a-2ef9-%012x</val></propSet>`+
			`<propSet><name>guest.hostName</name><val xsi:type="xsd:string">k8s-worker-%d</val></propSet>`+
			`<propSet><name>guest.net</name><val xsi:type="ArrayOfGuestNicInfo"><GuestNicInfo><network>k8s-nodes</network>`+
			`<ipAddress>10.20.%d.%d</ipAddress><ipAddress>fd00:20::%x</ipAddress><macAddress>00:50:56:9c:%02x:%02x</macAddress>`+
			`<connected>true</connected><deviceConfigId>4000</deviceConfigId><ipConfig>`+
			`<ipAddress><ipAddress>10.20.%d.%d</ipAddress><prefixLength>16</prefixLength><state>preferred</state></ipAddress>`+
			`<ipAddress><ipAddress>fd00:20::%x</ipAddress><prefixLength>64</prefixLength><origin>manual</origin><state>preferred</state></ipAddress>`+
			`</ipConfig></GuestNicInfo></val></propSet>`+
			`<propSet><name>name</name><val xsi:type="xsd:string">k8s-worker-%d</val></propSet>`+
			`<propSet><name>parent</name><val type="Folder" xsi:type="ManagedObjectReference">group-v22</val></propSet>`+
			`<propSet><name>resourcePool</name><val type="ResourcePool" xsi:type="ManagedObjectReference">resgroup-10</val></propSet>`+
			`<propSet><name>runtime.connectionState</name><val xsi:type="VirtualMachineConnectionState">connected</val></propSet>`+
			`<propSet><name>runtime.host</name><val type="HostSystem" xsi:type="ManagedObjectReference">host-12</val></propSet>`+
			`<propSet><name>runtime.powerState</name><val xsi:type="VirtualMachinePowerState">poweredOn</val></propSet></objects>`,
			1000+i, i, i, i, i/256, i%256, i, i/256, i%256, i/256, i%256, i, i)
	}
	b.WriteString(`</returnval></RetrievePropertiesExResponse>` + envelopeTail)
	return []byte(b.String())
}

// BenchmarkDecode compares the decoders on a page of 100 VMs'
// identities (vCenter's page size) and on a direct read of 100 VMs'
// details: per op, one answer.
func BenchmarkDecode(b *testing.B) {
	for _, tc := range []struct {
		name string
		body []byte
		dc   decoding
	}{
		{"identities", page(100), decodings[0]},
		{"details", detailsRead(100), decodings[1]},
	} {
		b.Run(tc.name+"/collectorxml", func(b *testing.B) {
			d := New(types.TypeFunc())
			b.SetBytes(int64(len(tc.body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := tc.dc.ours(d, tc.body); !ok {
					b.Fatal("declined")
				}
			}
		})
		b.Run(tc.name+"/govmomi", func(b *testing.B) {
			b.SetBytes(int64(len(tc.body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := tc.dc.theirs(tc.body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
