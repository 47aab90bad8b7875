package ingestbench

import (
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestProcCPU: the CPU time read from /proc/PID/stat grows with work done
// (it is what the server's rows per CPU-second divide by).
func TestProcCPU(t *testing.T) {
	pid := os.Getpid()
	before, rusage0 := procCPU(pid), cpuTime()
	for t0 := time.Now(); cpuTime()-rusage0 < 300*time.Millisecond && time.Since(t0) < 20*time.Second; {
	}
	d, want := procCPU(pid)-before, cpuTime()-rusage0
	if d < want-50*time.Millisecond || d > want+50*time.Millisecond {
		t.Fatalf("%v of CPU (getrusage) read as %v from /proc", want, d)
	}
	if got := cpuList(0, 1) + " " + cpuList(1, 4); got != "0 1-3" {
		t.Fatalf("cpuList: %q", got)
	}
}

// TestPinSelf: every thread is pinned to the cores asked, and restore
// undoes it.
func TestPinSelf(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("one core: nothing to pin apart")
	}
	restore, err := pinSelf(1, 2)
	if err != nil {
		t.Fatal(err)
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	pinned := set.Count() == 1 && set.IsSet(1)
	restore()
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	if !pinned || set.Count() != runtime.NumCPU() {
		t.Fatalf("pinned to core 1 only: %v; after restore %d cores", pinned, set.Count())
	}
}
