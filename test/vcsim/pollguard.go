package vcsim

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"time"
)

// pollGuard stands before the simulator's SOAP endpoint and keeps every
// PropertyCollector to one WaitForUpdatesEx at a time, as a real vCenter
// does.
//
// govmomi v0.56.0's simulator serves a WaitForUpdatesEx without looking at
// its request: a long poll whose client went away (its connection cut by a
// front mode change, its deadline passed) keeps waiting on the server until
// updates arrive or MaxWaitSeconds pass. A client that polls the same
// collector again meanwhile makes two polls run at once, and they race on
// the collector's pending updates (property_collector.go:885 against :983),
// which the race detector reports as a failure of whatever test runs. The
// guard ends the server side of a poll whose client is gone (the HTTP
// server cancels the request's context when the connection closes) with
// CancelWaitForUpdates, and holds a second poll of the same collector until
// the first has returned. It also ends a session's polls before the
// session logs out, and a collector's before it is destroyed: the
// simulator panics in a poll whose filter is gone.
type pollGuard struct {
	next http.HandlerFunc // the simulator's ServeSDK

	mu   sync.Mutex
	busy map[string]*running // collector (session cookie + NUL + moref) -> its poll
}

// running is a poll the simulator serves.
type running struct {
	done chan struct{} // closed when it has returned
	stop chan struct{} // closed to have it cancelled
	once sync.Once
}

func (p *running) cancel() { p.once.Do(func() { close(p.stop) }) }

// cancelRetry is how often the guard repeats CancelWaitForUpdates until the
// abandoned poll returns: a cancel that arrives before the simulator has
// installed the poll's cancel function is lost.
const cancelRetry = 50 * time.Millisecond

// waitForUpdatesThis matches the collector a WaitForUpdatesEx is made on;
// endsPolls the requests that end a session's collectors or filters.
var (
	waitForUpdatesThis = regexp.MustCompile(`<WaitForUpdatesEx[^>]*>\s*<_this[^>]*>([^<]+)</_this>`)
	endsPolls          = regexp.MustCompile(`<(Logout[\s/>]|DestroyPropertyCollector[^>]*>\s*<_this[^>]*>([^<]+)</_this>)`)
)

func newPollGuard(next http.HandlerFunc) *pollGuard {
	return &pollGuard{next: next, busy: map[string]*running{}}
}

func (g *pollGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	_ = r.Body.Close()
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	session := r.Header.Get("Cookie") + "\x00"
	m := waitForUpdatesThis.FindSubmatch(body)
	if m == nil {
		if e := endsPolls.FindSubmatch(body); e != nil {
			// A logout ends every collector of the session; a destroyed
			// collector, its own.
			g.end(session + string(e[2]))
		}
		g.next(w, r)
		return
	}
	this := string(m[1])
	key := session + this
	p, ok := g.acquire(r, key)
	if !ok {
		return // this poll's own client is gone: nobody to answer
	}
	served := make(chan struct{})
	watched := make(chan struct{})
	// Deferred: should the simulator panic in the poll anyway (net/http
	// recovers it), the collector must not stay held. The watcher is done
	// before the collector is released: a late cancel would end the next
	// poll (the simulator keeps the last poll's cancel function).
	defer g.release(key, p)
	defer func() { <-watched }()
	defer close(served)
	go func() {
		defer close(watched)
		select {
		case <-served:
			return
		case <-r.Context().Done():
		case <-p.stop:
		}
		g.cancel(r, this, served)
	}()
	g.next(w, r)
}

// end cancels the polls whose key starts with prefix (a session, or a
// session's collector) and waits until they have returned.
func (g *pollGuard) end(prefix string) {
	g.mu.Lock()
	var polls []*running
	for k, p := range g.busy {
		if strings.HasPrefix(k, prefix) {
			polls = append(polls, p)
		}
	}
	g.mu.Unlock()
	for _, p := range polls {
		p.cancel()
		<-p.done
	}
}

// acquire waits until no other poll runs on key and claims it; false if the
// request's client went away first.
func (g *pollGuard) acquire(r *http.Request, key string) (*running, bool) {
	for {
		g.mu.Lock()
		other, busy := g.busy[key]
		if !busy {
			p := &running{done: make(chan struct{}), stop: make(chan struct{})}
			g.busy[key] = p
			g.mu.Unlock()
			return p, true
		}
		g.mu.Unlock()
		select {
		case <-other.done:
		case <-r.Context().Done():
			return nil, false
		}
	}
}

// polls counts the polls the simulator is serving.
func (g *pollGuard) polls() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.busy)
}

func (g *pollGuard) release(key string, p *running) {
	g.mu.Lock()
	delete(g.busy, key)
	g.mu.Unlock()
	close(p.done)
}

// cancel asks the simulator, in the abandoned poll's session, to end the
// waits on collector this, until the poll has returned.
func (g *pollGuard) cancel(r *http.Request, this string, served <-chan struct{}) {
	body := `<?xml version="1.0" encoding="UTF-8"?>` +
		`<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" ` +
		`xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body>` +
		`<CancelWaitForUpdates xmlns="urn:vim25"><_this type="PropertyCollector">` + this +
		`</_this></CancelWaitForUpdates></soapenv:Body></soapenv:Envelope>`
	tick := time.NewTicker(cancelRetry)
	defer tick.Stop()
	for {
		select {
		case <-served: // returned by itself meanwhile: a cancel now would hit the next poll
			return
		default:
		}
		req := httptest.NewRequest(http.MethodPost, r.URL.Path, bytes.NewReader([]byte(body)))
		req.Header = r.Header.Clone()
		req.ContentLength = int64(len(body))
		g.next(httptest.NewRecorder(), req)
		select {
		case <-served:
			return
		case <-tick.C:
		}
	}
}
