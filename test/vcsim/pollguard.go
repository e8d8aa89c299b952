package vcsim

import (
	"bytes"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
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
//
// And it gives the collector real vCenter's versions. The simulator
// answers every poll with the version "-" and forgets the updates it
// answered with, so an answer lost on the way (a connection cut, a
// client's deadline) loses its updates for good. A real vCenter's
// versions may be used more than once: "Re-using a version allows a
// client to recover a change sequence after a transient failure on a
// previous invocation" (vSphere API reference, UpdateSet.truncated). The
// guard numbers the versions it hands out per collector and keeps the
// last answer that carried updates; a poll made again with the version
// that answer was made for (its client never got it) is answered with it.
type pollGuard struct {
	next http.HandlerFunc // the simulator's ServeSDK

	mu       sync.Mutex
	busy     map[string]*running // collector (session cookie + NUL + moref) -> its poll
	versions map[string]*versions
}

// versions are a collector's: how many were handed out, and the last
// answer with updates, for a poll made again with the version it was
// made for.
type versions struct {
	issued    int
	askedWith string // the version the last answer with updates was made for ("": none kept)
	answer    *httptest.ResponseRecorder
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
	// pollVersion is the version a poll is made with (absent: the
	// initial one); answerVersion, the version of an answer with updates.
	pollVersion   = regexp.MustCompile(`(<version[^>]*>)([^<]*)(</version>)`)
	answerVersion = regexp.MustCompile(`(<returnval[^>]*>\s*<version[^>]*>)([^<]*)(</version>)`)
	endsPolls     = regexp.MustCompile(`<(Logout[\s/>]|DestroyPropertyCollector[^>]*>\s*<_this[^>]*>([^<]+)</_this>)`)
)

func newPollGuard(next http.HandlerFunc) *pollGuard {
	return &pollGuard{next: next, busy: map[string]*running{}, versions: map[string]*versions{}}
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
	version := ""
	if v := pollVersion.FindSubmatch(body); v != nil {
		version = string(v[2])
	}
	if answer := g.lost(key, version); answer != nil {
		g.release(key, p)
		copyAnswer(w, answer)
		return
	}
	if version != "" {
		// The simulator's own version, whatever the client holds.
		body = pollVersion.ReplaceAll(body, []byte("${1}-${3}"))
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	}
	answer := httptest.NewRecorder()
	served := make(chan struct{})
	watched := make(chan struct{})
	// Deferred: should the simulator panic in the poll anyway (net/http
	// recovers it), the collector must not stay held. The watcher is done
	// before the collector is released: a late cancel would end the next
	// poll (the simulator keeps the last poll's cancel function).
	defer g.release(key, p)
	// Numbered and kept before the collector is released: a poll made
	// again at once must find it.
	defer func() { copyAnswer(w, g.answered(key, version, answer)) }()
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
	g.next(answer, r)
}

// lost returns the answer kept for a poll made again with the version it
// was made for, if any.
func (g *pollGuard) lost(key, version string) *httptest.ResponseRecorder {
	g.mu.Lock()
	defer g.mu.Unlock()
	if v := g.versions[key]; v != nil && version != "" && v.askedWith == version {
		return v.answer
	}
	return nil
}

// answered numbers the version of an answer with updates and keeps it
// for a poll made again with version; any other answer (no updates, a
// fault) is the client's to repeat its version after, so none is kept.
func (g *pollGuard) answered(key, version string, answer *httptest.ResponseRecorder) *httptest.ResponseRecorder {
	g.mu.Lock()
	defer g.mu.Unlock()
	v := g.versions[key]
	if v == nil {
		v = &versions{}
		g.versions[key] = v
	}
	body := answer.Body.Bytes()
	if answer.Code != http.StatusOK || !answerVersion.Match(body) {
		v.askedWith, v.answer = "", nil
		return answer
	}
	v.issued++
	numbered := httptest.NewRecorder()
	maps.Copy(numbered.Header(), answer.Header())
	numbered.Header().Del("Content-Length")
	numbered.WriteHeader(answer.Code)
	_, _ = numbered.Write(answerVersion.ReplaceAll(body, []byte("${1}"+strconv.Itoa(v.issued)+"${3}")))
	v.askedWith, v.answer = version, numbered
	if version == "" {
		v.askedWith = "" // the initial version is always served anew
		v.answer = nil
	}
	return numbered
}

// copyAnswer writes a recorded answer to w.
func copyAnswer(w http.ResponseWriter, answer *httptest.ResponseRecorder) {
	maps.Copy(w.Header(), answer.Header())
	w.Header().Del("Content-Length")
	w.WriteHeader(answer.Code)
	_, _ = w.Write(answer.Body.Bytes())
}

// end cancels the polls whose key starts with prefix (a session, or a
// session's collector) and waits until they have returned.
func (g *pollGuard) end(prefix string) {
	g.mu.Lock()
	for k := range g.versions {
		if strings.HasPrefix(k, prefix) {
			delete(g.versions, k)
		}
	}
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
