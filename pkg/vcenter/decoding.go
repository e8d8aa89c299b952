package vcenter

import (
	"bytes"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/xml"
	"k8s.io/klog/v2"
)

// DefaultShadowEvery: one page in this many that the fast decoder
// (collectorxml) decodes is decoded by govmomi's decoder too, and the two
// compared.
const DefaultShadowEvery = 200

// MaxAnswerBytes bounds a property collector answer read into memory; a
// page of 1,000 VMs' details is a few MB.
const MaxAnswerBytes = 256 << 20

// Decoding is the process's policy and record of the fast decoder, one
// for every client (Options.Decoding): it can be switched off from the
// start, and switches itself off for good the first time a shadow decode
// disagrees with govmomi's.
type Decoding struct {
	// Off: every answer is decoded by govmomi's decoder (the operator's
	// switch).
	Off bool
	// ShadowEvery: see DefaultShadowEvery (0: the default; negative:
	// never).
	ShadowEvery int

	disabled atomic.Bool
	pages    atomic.Int64
	once     sync.Once
}

// Enabled tells whether the fast decoder is used: not switched off, and
// no shadow decode disagreed.
func (d *Decoding) Enabled() bool { return d != nil && !d.Off && !d.disabled.Load() }

// shadowed tells whether this fast-decoded page is decoded again.
func (d *Decoding) shadowed() bool {
	every := d.ShadowEvery
	if every == 0 {
		every = DefaultShadowEvery
	}
	return every > 0 && d.pages.Add(1)%int64(every) == 1%int64(every)
}

// disagree switches the fast decoder off for the process, and says so
// once. Nothing of the page is logged: it may name anything in vCenter.
func (d *Decoding) disagree(vc, method string) {
	d.disabled.Store(true)
	d.once.Do(func() {
		klog.Background().Error(nil, "The fast property-collector decoder disagreed with govmomi's decoder on a page; it is switched off for this process (every answer is now decoded by govmomi), please report it",
			"vcenter", vc, "method", method)
	})
}

// govmomiDecode decodes body into a new response of res's type with
// govmomi's decoder.
func govmomiDecode(body []byte, types func(string) (reflect.Type, bool), res soap.HasFault) error {
	dec := xml.NewDecoder(bytes.NewReader(body))
	dec.TypeFunc = types
	return dec.Decode(&soap.Envelope{Body: res})
}
