//go:build e2e

package controlplane

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestStartAgainOnATakenPort: a port chosen free but taken before the API
// server binds it (by a test running in parallel, say) makes Start try
// again on new ports; a port taken at every attempt fails Start with
// errPortTaken and the log that says so.
func TestStartAgainOnATakenPort(t *testing.T) {
	ctx := context.Background()
	bin, err := Binaries(ctx, filepath.Join("..", ".."), os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	taken := held.Addr().(*net.TCPAddr).Port
	// takenFor gives the API server the held port at its first n attempts.
	takenFor := func(n int) (func(int) ([]int, error), *int) {
		calls := 0
		return func(k int) ([]int, error) {
			ports, err := freePorts(k)
			if calls++; err == nil && calls <= n {
				ports[2] = taken
			}
			return ports, err
		}, &calls
	}

	t.Run("once", func(t *testing.T) {
		ports, calls := takenFor(1)
		cp, err := startOn(ctx, bin, t.TempDir(), ports)
		if err != nil {
			t.Fatalf("Start after a taken port: %v", err)
		}
		defer cp.Stop()
		if *calls != 2 {
			t.Errorf("ports chosen %d times, want 2", *calls)
		}
		if strings.HasSuffix(cp.URL, ":"+strconv.Itoa(taken)) {
			t.Errorf("the API server is on the taken port: %s", cp.URL)
		}
		kube, err := cp.Client()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kube.Discovery().ServerVersion(); err != nil {
			t.Errorf("the API server does not answer: %v", err)
		}
	})

	t.Run("always", func(t *testing.T) {
		ports, calls := takenFor(3)
		cp, err := startOn(ctx, bin, t.TempDir(), ports)
		if err == nil {
			cp.Stop()
			t.Fatal("Start succeeded on a port taken at every attempt")
		}
		if !errors.Is(err, errPortTaken) || !strings.Contains(err.Error(), "kube-apiserver exited") {
			t.Errorf("error %q: want errPortTaken, naming kube-apiserver", err)
		}
		if *calls != 3 {
			t.Errorf("ports chosen %d times, want 3", *calls)
		}
	})
}
