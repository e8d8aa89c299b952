package vcsim

import (
	"net"
	"sync"
	"time"
)

// FrontMode is what the TCP front of a simulated vCenter does with
// connections.
type FrontMode int

// The front modes.
const (
	// Up forwards connections to the simulator.
	Up FrontMode = iota
	// Down closes the listener: connections are refused, like a stopped vCenter.
	Down
	// Hung accepts connections and never answers, like a black-holed vCenter.
	Hung
	// Silent keeps every open connection open and drops everything sent
	// on it, both ways, and holds new connections like Hung: a vCenter (or
	// a firewall in front of it) that stops answering on an established
	// connection. Clients notice only by their own deadlines.
	Silent
)

func (m FrontMode) String() string {
	switch m {
	case Up:
		return "up"
	case Down:
		return "down"
	case Hung:
		return "hung"
	case Silent:
		return "silent"
	}
	return "unknown"
}

// front is a TCP forwarder on a fixed 127.0.0.1 port in front of a
// simulator, so that a vCenter can go away and come back on the same address
// with its state (inventory, tags, sessions) kept.
type front struct {
	addr   string // fixed listen address
	target string

	mu    sync.Mutex
	mode  FrontMode
	delay time.Duration // added before every chunk forwarded, both ways
	ln    net.Listener
	conns map[net.Conn]bool // true: a client's connection; false: its upstream
	wg    sync.WaitGroup
}

func newFront(target string) (*front, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &front{addr: ln.Addr().String(), target: target, conns: map[net.Conn]bool{}}
	f.serve(ln)
	return f, nil
}

func (f *front) serve(ln net.Listener) {
	f.ln = ln
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			mode := f.mode
			if mode == Down {
				// Accepted just before the listener was closed: refused.
				f.mu.Unlock()
				_ = c.Close()
				return
			}
			f.conns[c] = true
			f.mu.Unlock()
			if mode == Hung || mode == Silent {
				continue // held open, never read: the client waits until its own deadline
			}
			f.wg.Add(1)
			go func() {
				defer f.wg.Done()
				f.forward(c)
			}()
		}
	}()
}

func (f *front) forward(c net.Conn) {
	defer f.drop(c)
	up, err := net.Dial("tcp", f.target)
	if err != nil {
		return
	}
	f.mu.Lock()
	if _, open := f.conns[c]; !open {
		// Closed by a mode change while dialling: so is its upstream.
		f.mu.Unlock()
		_ = up.Close()
		return
	}
	f.conns[up] = false
	f.mu.Unlock()
	defer f.drop(up)
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if d := f.currentDelay(); n > 0 && d > 0 {
				time.Sleep(d) // a slow link: bounded by the test's delays
			}
			if n > 0 && f.currentMode() != Silent {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(up, c)
	go cp(c, up)
	<-done
	<-done
}

// clients counts the clients' open connections.
func (f *front) clients() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, client := range f.conns {
		if client {
			n++
		}
	}
	return n
}

func (f *front) currentMode() FrontMode {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mode
}

func (f *front) currentDelay() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.delay
}

func (f *front) setDelay(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.delay = d
}

func (f *front) drop(c net.Conn) {
	_ = c.Close()
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
}

// set switches the mode. Every open connection is closed on a change
// (but to Silent, which keeps them open and mute), so clients notice at
// their next request.
func (f *front) set(mode FrontMode) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if mode == f.mode {
		return nil
	}
	if mode != Silent {
		for c := range f.conns {
			_ = c.Close()
			delete(f.conns, c)
		}
	}
	prev := f.mode
	f.mode = mode
	switch {
	case mode == Down:
		return f.ln.Close()
	case prev == Down:
		ln, err := net.Listen("tcp", f.addr)
		if err != nil {
			f.mode = Down
			return err
		}
		f.serve(ln)
	}
	return nil
}

func (f *front) close() {
	f.mu.Lock()
	for c := range f.conns {
		_ = c.Close()
	}
	_ = f.ln.Close() // already closed when Down
	f.mu.Unlock()
	f.wg.Wait()
}
