package procmem

import (
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"
)

// TestStatus: this process's fields read as plausible byte counts; a
// missing field or process is not ok.
func TestStatus(t *testing.T) {
	for _, field := range []string{"VmRSS", "VmHWM", "RssAnon"} {
		v, ok := Status(0, field)
		if !ok || v <= 0 || v%1024 != 0 {
			t.Errorf("%s = %d, %v; want a positive number of KiB", field, v, ok)
		}
		if w, ok := Status(os.Getpid(), field); !ok || w <= 0 {
			t.Errorf("%s by pid = %d, %v", field, w, ok)
		}
	}
	if _, ok := Status(0, "NoSuchField"); ok {
		t.Error("a missing field is ok")
	}
	if _, ok := Status(1<<30, "VmRSS"); ok {
		t.Error("a missing process is ok")
	}
}

// TestSamplePeak: the peak of this process's anonymous memory rises by what
// it allocates and touches meanwhile; sampling a child stops by itself when
// the child ends.
func TestSamplePeak(t *testing.T) {
	before, _ := Status(0, "RssAnon")
	stop := SamplePeak(0, "RssAnon")
	buf := make([]byte, 64<<20)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1
	}
	runtime.KeepAlive(buf)
	time.Sleep(20 * time.Millisecond) // a few samples see it
	peak := stop()
	if peak < before+48<<20 {
		t.Errorf("peak %d MiB, want at least %d MiB + the 64 MiB touched", peak>>20, before>>20)
	}
	if stop() != peak {
		t.Error("a second stop changed the peak")
	}

	cmd := exec.Command("sleep", "0.05")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopChild := SamplePeak(cmd.Process.Pid, "VmHWM")
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if p := stopChild(); p <= 0 {
		t.Errorf("child's VmHWM peak %d", p)
	}
}
