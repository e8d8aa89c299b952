package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// pin sets the CPU affinity of every thread of process pid to cpus (none:
// every CPU). Threads started later inherit their creator's. Two passes,
// for threads started while the first ran.
func pin(pid int, cpus ...int) error {
	var set unix.CPUSet
	if len(cpus) == 0 {
		for c := range runtime.NumCPU() {
			set.Set(c)
		}
	}
	for _, c := range cpus {
		set.Set(c)
	}
	for range 2 {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return err
		}
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("pin thread %d of %d: %w", tid, pid, err)
			}
		}
	}
	return nil
}
