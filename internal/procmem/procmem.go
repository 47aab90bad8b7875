// Package procmem reads a process's memory figures from /proc/<pid>/status
// (Linux): the memory tests, which bound a child's peak, and the benchmarks
// that report peak RSS read them through it.
//
// VmHWM (the kernel's high-water mark of the resident set) also counts the
// pages of the executable that were read in; RssAnon, sampled, is the
// anonymous memory alone, which is what a program's own data holds. Not
// ru_maxrss: Linux carries the forking process's peak into a child's
// ru_maxrss across exec.
package procmem

import (
	"bytes"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

// Status returns the field (VmHWM, VmRSS, RssAnon, ...) of process pid (0:
// this process) in bytes. ok is false when the process is gone or has no
// such field (a zombie has no memory fields).
func Status(pid int, field string) (bytesUsed int64, ok bool) {
	path := "/proc/self/status"
	if pid != 0 {
		path = "/proc/" + strconv.Itoa(pid) + "/status"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for line := range bytes.Lines(b) {
		v, found := bytes.CutPrefix(line, []byte(field+":"))
		if !found {
			continue
		}
		f := bytes.Fields(v) // "123456 kB"
		if len(f) == 0 {
			return 0, false
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		return kb << 10, err == nil
	}
	return 0, false
}

// SamplePeak reads the field of process pid (0: this process) every 2 ms
// until the returned function is called or the field can no longer be read
// (the process ended); the function returns the largest value read.
func SamplePeak(pid int, field string) (stop func() int64) {
	var peak atomic.Int64
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			v, ok := Status(pid, field)
			if !ok {
				return
			}
			peak.Store(max(peak.Load(), v))
			select {
			case <-quit:
				return
			case <-tick.C:
			}
		}
	}()
	return func() int64 {
		select {
		case <-quit:
		default:
			close(quit)
		}
		<-done
		return peak.Load()
	}
}

// ResetPeak resets this process's VmHWM to its current RSS, so that a
// later VmHWM measures what came after.
func ResetPeak() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }
