package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"strings"
	"time"
)

// DebugAddrEnv names the loopback address where the controller manager
// serves Go's profiles (/debug/pprof/: CPU, heap, block, mutex,
// goroutines) when set, for benchmarks and performance work. The
// framework's --profiling stays off: it would also serve /debug/flags/v,
// which raises the log verbosity past the cap (see maxVerbosity).
// Profiles hold stack traces and sizes, never memory contents.
const DebugAddrEnv = "VSPHERE_CCM_DEBUG_ADDR"

// startDebugServer serves the profiles on the address env names, if any,
// with block and mutex profiling on; it refuses an address that is not
// loopback. The returned function stops it.
func startDebugServer(env []string, stderr io.Writer) (func(), error) {
	addr := ""
	for _, kv := range env {
		if k, v, _ := strings.Cut(kv, "="); k == DebugAddrEnv {
			addr = v
		}
	}
	if addr == "" {
		return func() {}, nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%s=%q: %w (write 127.0.0.1:PORT)", DebugAddrEnv, addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("%s=%q: profiles are served on loopback only (127.0.0.1:PORT or [::1]:PORT)", DebugAddrEnv, addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", DebugAddrEnv, err)
	}
	runtime.SetBlockProfileRate(int((10 * time.Microsecond).Nanoseconds()))
	runtime.SetMutexProfileFraction(10)
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(stderr, "warning: %s: %v\n", DebugAddrEnv, err)
		}
	}()
	fmt.Fprintf(stderr, "serving Go profiles on http://%s/debug/pprof/ (%s)\n", ln.Addr(), DebugAddrEnv)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}
