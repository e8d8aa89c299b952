package controlplane

import (
	"os"
	"testing"
)

// CPUTime reads this process's own times: they are there and never go
// back.
func TestCPUTime(t *testing.T) {
	a, err := CPUTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for i := range 50_000_000 {
		x += i % 7
	}
	b, err := CPUTime(os.Getpid())
	if err != nil || b < a || x == 0 {
		t.Fatalf("CPU time %v then %v (%v)", a, b, err)
	}
	if _, err := CPUTime(-1); err == nil {
		t.Error("no error for a process that does not exist")
	}
}
