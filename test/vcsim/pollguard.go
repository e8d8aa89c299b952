package vcsim

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
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
// the first has returned.
type pollGuard struct {
	next http.HandlerFunc // the simulator's ServeSDK

	mu   sync.Mutex
	busy map[string]chan struct{} // collector (session cookie + moref) -> closed when its poll returns
}

// cancelRetry is how often the guard repeats CancelWaitForUpdates until the
// abandoned poll returns: a cancel that arrives before the simulator has
// installed the poll's cancel function is lost.
const cancelRetry = 50 * time.Millisecond

// waitForUpdatesThis matches the collector a WaitForUpdatesEx is made on.
var waitForUpdatesThis = regexp.MustCompile(`<WaitForUpdatesEx[^>]*>\s*<_this[^>]*>([^<]+)</_this>`)

func newPollGuard(next http.HandlerFunc) *pollGuard {
	return &pollGuard{next: next, busy: map[string]chan struct{}{}}
}

func (g *pollGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	_ = r.Body.Close()
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	m := waitForUpdatesThis.FindSubmatch(body)
	if m == nil {
		g.next(w, r)
		return
	}
	this := string(m[1])
	key := r.Header.Get("Cookie") + "\x00" + this
	done, ok := g.acquire(r, key)
	if !ok {
		return // this poll's own client is gone: nobody to answer
	}
	served := make(chan struct{})
	go func() {
		select {
		case <-served:
		case <-r.Context().Done():
			g.cancel(r, this, served)
		}
	}()
	g.next(w, r)
	close(served)
	g.release(key, done)
}

// acquire waits until no other poll runs on key and claims it; false if the
// request's client went away first.
func (g *pollGuard) acquire(r *http.Request, key string) (chan struct{}, bool) {
	for {
		g.mu.Lock()
		running, busy := g.busy[key]
		if !busy {
			done := make(chan struct{})
			g.busy[key] = done
			g.mu.Unlock()
			return done, true
		}
		g.mu.Unlock()
		select {
		case <-running:
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

func (g *pollGuard) release(key string, done chan struct{}) {
	g.mu.Lock()
	delete(g.busy, key)
	g.mu.Unlock()
	close(done)
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
