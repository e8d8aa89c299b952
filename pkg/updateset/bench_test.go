package updateset

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vmware/govmomi/vim25/types"
)

// page is a full-read page of n VMs' identities as vCenter writes it.
func page(n int) []byte {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>
<soapenv:Envelope xmlns:soapenc="http://schemas.xmlsoap.org/soap/encoding/"
 xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"
 xmlns:xsd="http://www.w3.org/2001/XMLSchema"
 xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<soapenv:Body>
<WaitForUpdatesExResponse xmlns="urn:vim25"><returnval><version>1</version><filterSet><filter type="PropertyFilter">session[521da002-3565-aed7-bfc9-a37573136c0e]52b39f40-3106-c12b-715c-bc09e1862cbf</filter>`)
	for i := range n {
		fmt.Fprintf(&b, `<objectSet><kind>enter</kind><obj type="VirtualMachine">vm-%d</obj>`+
			`<changeSet><name>config.template</name><op>assign</op><val xsi:type="xsd:boolean">false</val></changeSet>`+
			`<changeSet><name>config.uuid</name><op>assign</op><val xsi:type="xsd:string">4213a5c0-6f1e-7b1a-2ef9-%012x</val></changeSet>`+
			`<changeSet><name>name</name><op>assign</op><val xsi:type="xsd:string">k8s-worker-%d</val></changeSet>`+
			`<changeSet><name>runtime.connectionState</name><op>assign</op><val xsi:type="VirtualMachineConnectionState">connected</val></changeSet></objectSet>`,
			1000+i, i, i)
	}
	b.WriteString(`</filterSet><truncated>true</truncated></returnval></WaitForUpdatesExResponse>
</soapenv:Body>
</soapenv:Envelope>
`)
	return []byte(b.String())
}

// BenchmarkDecode compares the decoders on a page of 100 VMs (vCenter's
// page size): per op, one page.
func BenchmarkDecode(b *testing.B) {
	body := page(100)
	b.Run("updateset", func(b *testing.B) {
		d := New(types.TypeFunc())
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := d.Decode(body); !ok {
				b.Fatal("declined")
			}
		}
	})
	b.Run("govmomi", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := govmomi(body); err != nil {
				b.Fatal(err)
			}
		}
	})
}
