package secret

import (
	"fmt"
	"io"
)

// Redacted is what a set Value prints instead of its content.
const Redacted = "[redacted]"

// Value is a sensitive string. The zero value is empty.
//
// The content is held by a closure, so even printers that bypass String
// methods (fmt on unexported fields, reflection-based dumpers) see only a
// function address, never the bytes or their length.
type Value struct {
	get func() string
}

// New returns a Value holding s. New("") is the empty Value.
func New(s string) Value {
	if s == "" {
		return Value{}
	}
	return Value{get: func() string { return s }}
}

// Reveal returns the sensitive content. Call it only where the content is
// handed to the system that needs it (a login request), never for output.
func (v Value) Reveal() string {
	if v.get == nil {
		return ""
	}
	return v.get()
}

// IsSet reports whether the Value holds a non-empty string.
func (v Value) IsSet() bool { return v.get != nil }

// Equal reports whether two Values hold the same content. It lets
// github.com/google/go-cmp compare structs that contain Values.
func (v Value) Equal(o Value) bool { return v.Reveal() == o.Reveal() }

// String returns "[redacted]" when set and "" when empty.
func (v Value) String() string {
	if v.IsSet() {
		return Redacted
	}
	return ""
}

// GoString implements fmt.GoStringer for %#v.
func (v Value) GoString() string {
	if v.IsSet() {
		return `secret.Value("` + Redacted + `")`
	}
	return `secret.Value("")`
}

// Format implements fmt.Formatter so that no verb (%x, %q, %d, ...) can
// reach the content.
func (v Value) Format(f fmt.State, verb rune) {
	switch {
	case verb == 'v' && f.Flag('#'):
		_, _ = io.WriteString(f, v.GoString())
	case verb == 'q':
		_, _ = fmt.Fprintf(f, "%q", v.String())
	default:
		_, _ = io.WriteString(f, v.String())
	}
}

// MarshalJSON writes "[redacted]" (or "" when empty).
func (v Value) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf("%q", v.String())), nil
}

// MarshalText writes "[redacted]" (or "" when empty); used by YAML and text encoders.
func (v Value) MarshalText() ([]byte, error) { return []byte(v.String()), nil }
