package vcsim

import (
	"bytes"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
)

// What a vCenter answered, by method, counted on the server: the same
// count for any client (this CCM, the reference, which exports none), so
// that benchmarks compare what each cost the vCenter. The administrator's
// own requests (tests and benchmarks changing the inventory, with the
// User-Agent adminAgent) are not counted.

// adminAgent is the User-Agent of the administrator's clients.
const adminAgent = "vcsim-admin"

// methodCounts are the requests counted since CountMethods.
type methodCounts struct {
	mu sync.Mutex
	on bool
	n  map[string]int64
}

// CountMethods starts counting the requests this vCenter answers, by
// method: SOAP by the body's operation ("RetrievePropertiesEx"), REST as
// "REST <verb> <path>" with identifiers replaced by {id} and the ~action
// kept, STS token requests as "STS".
func (v *VCenter) CountMethods() {
	v.methods.mu.Lock()
	defer v.methods.mu.Unlock()
	v.methods.on = true
	if v.methods.n == nil {
		v.methods.n = map[string]int64{}
	}
}

// Methods returns the counts so far (nil before CountMethods).
func (v *VCenter) Methods() map[string]int64 {
	v.methods.mu.Lock()
	defer v.methods.mu.Unlock()
	return maps.Clone(v.methods.n)
}

// counted wraps next so that its requests are counted as kind ("SOAP",
// "REST", "STS") while counting is on.
func (v *VCenter) counted(kind string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v.methods.mu.Lock()
		on := v.methods.on
		v.methods.mu.Unlock()
		if on && r.Header.Get("User-Agent") != adminAgent {
			name := kind
			switch kind {
			case "SOAP":
				var body []byte
				if r.Body != nil {
					body, _ = io.ReadAll(r.Body)
					r.Body = io.NopCloser(bytes.NewReader(body))
				}
				name = SOAPOperation(body)
			case "REST":
				name = "REST " + r.Method + " " + RESTRoute(r.URL.Path, r.URL.Query().Get("~action"))
			}
			v.methods.mu.Lock()
			v.methods.n[name]++
			v.methods.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

// SOAPOperation is the name of the first element in a SOAP envelope's
// Body ("unknown" if none).
func SOAPOperation(body []byte) string {
	i := bytes.Index(body, []byte("Body"))
	if i < 0 {
		return "unknown"
	}
	rest := body[i:]
	j := bytes.IndexByte(rest, '>')
	if j < 0 {
		return "unknown"
	}
	rest = rest[j+1:]
	k := bytes.IndexByte(rest, '<')
	if k < 0 {
		return "unknown"
	}
	rest = rest[k+1:]
	end := bytes.IndexAny(rest, " />\t\r\n")
	if end <= 0 {
		return "unknown"
	}
	name := string(rest[:end])
	if c := strings.LastIndexByte(name, ':'); c >= 0 {
		name = name[c+1:]
	}
	return name
}

// RESTRoute is a vAPI path with its identifiers (segments holding a colon
// or a digit-led value, as tag and category IDs do) replaced by {id}, and
// the ~action appended.
func RESTRoute(path, action string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		if strings.Contains(s, ":") || (s != "" && s[0] >= '0' && s[0] <= '9') {
			segs[i] = "{id}"
		}
	}
	out := strings.Join(segs, "/")
	if action != "" {
		out += "?~action=" + action
	}
	return out
}
