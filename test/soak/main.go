// Command soak runs the CCM binary (three replicas with leader election,
// one of them, the observer, never killed)
// against a real API server and three simulated vCenters under a seeded
// random schedule of faults, and checks its promises all along:
//
//   - no Node is deleted while its VM exists anywhere (hidden from the
//     CCM's user by a permission change included);
//   - once the faults stop, every Node's zone and region equal what its VM
//     has (labels.onDrift: relabel), and the Nodes of destroyed VMs are gone,
//     within 30 s;
//   - at most 2 SOAP sessions per vCenter per replica;
//   - at most 1 rejected login per vCenter per replica per loginBackoff;
//   - no growth of goroutines or resident memory of a replica.
//
// A failure prints the seed that replays the schedule:
//
//	make soak SOAK=3m SEED=42
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/controlplane"
)

func main() {
	duration := flag.Duration("duration", 3*time.Minute, "how long faults are injected")
	seed := flag.Uint64("seed", 0, "seed of the fault schedule (0: from the clock)")
	binary := flag.String("ccm", "bin/vsphere-cloud-controller-manager", "the CCM binary")
	keep := flag.Bool("keep", false, "keep the work directory (logs)")
	flag.Parse()
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	err := run(ctx, *seed, *duration, *binary, *keep)
	if err != nil {
		fmt.Fprintf(os.Stderr, "soak FAILED (seed %d): %v\nreplay: make soak SOAK=%v SEED=%d\n", *seed, err, *duration, *seed)
		os.Exit(1)
	}
	fmt.Printf("soak passed (seed %d, %v of faults)\n", *seed, *duration)
}

func run(ctx context.Context, seed uint64, duration time.Duration, binary string, keep bool) error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	if binary, err = filepath.Abs(binary); err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "soak-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Printf("work directory (logs): %s\n", work)
	} else {
		defer os.RemoveAll(work)
	}
	bin, err := controlplane.Binaries(ctx, root, os.Stderr)
	if err != nil {
		return err
	}
	cp, err := controlplane.Start(ctx, bin, work)
	if err != nil {
		return err
	}
	defer cp.Stop()
	s, err := newSoak(ctx, cp, binary, work, rand.New(rand.NewPCG(seed, seed^0x5eed)))
	if err != nil {
		return err
	}
	defer s.close()
	fmt.Printf("soak: seed %d, %v of faults over %d vCenters, %d Nodes, %d CCM replicas (replica %d never killed)\n", seed, duration, len(s.fleet.VCenters), len(s.truth.nodes()), replicas, observer)
	if err := s.start(ctx); err != nil {
		return err
	}
	faultErr := s.inject(ctx, duration)
	settleErr := s.settle(ctx)
	s.report()
	if err := s.violations(); err != nil {
		return err
	}
	if faultErr != nil {
		return faultErr
	}
	if settleErr != nil {
		return fmt.Errorf("%w (CCM logs and faults.log, what was done to whom and when, in %s; run with -keep to keep them)", settleErr, work)
	}
	return nil
}
