package cli

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sluicedb/sluice/internal/procmem"
	"github.com/sluicedb/sluice/internal/redisproc"
	"github.com/sluicedb/sluice/rdb"
)

// builtSluice is the sluice binary of the package's run, built by the
// first test that needs it (each build links a binary of ~37 MB: seconds
// of CPU a test); TestMain removes its directory.
var builtSluice struct {
	once     sync.Once
	dir, bin string
	err      error
}

// buildSluice returns the sluice binary for a test that needs a process of
// its own, built without the race detector (whose shadow memory would
// swamp a peak-RSS figure).
func buildSluice(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	builtSluice.once.Do(func() {
		dir, err := os.MkdirTemp("", "cli-sluice-")
		if err != nil {
			builtSluice.err = fmt.Errorf("build directory: %w", err)
			return
		}
		builtSluice.dir = dir
		bin := filepath.Join(dir, "sluice")
		if out, err := exec.Command("go", "build", "-o", bin, "github.com/sluicedb/sluice/cmd/sluice").CombinedOutput(); err != nil {
			builtSluice.err = fmt.Errorf("go build: %w\n%s", err, out)
			return
		}
		builtSluice.bin = bin
	})
	if builtSluice.err != nil {
		t.Fatal(builtSluice.err)
	}
	return builtSluice.bin
}

// removeBuiltSluice removes the binary buildSluice built, if it did.
func removeBuiltSluice() {
	if builtSluice.dir != "" {
		os.RemoveAll(builtSluice.dir)
	}
}

// bigValuesRDB has a real redis-server write the values that made the
// parallel export hold several copies of one value: a stream of 400k
// entries (its JSON was built whole, then copied onto a tape and into the
// writer's buffer), a 12 MB string full of characters JSON escapes, a list
// and a hash with one 6 MB element each, around ordinary small keys.
func bigValuesRDB(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	srv, err := redisproc.Start(context.Background(), "", dir)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	chunk := strings.Repeat("line \"quoted\"\tand\\slashed ünïcode\n", 1<<10) // 36 KiB
	err = srv.Pipeline(context.Background(), func(w *bufio.Writer) error {
		for i := 0; i < 2000; i++ {
			redisproc.WriteCommand(w, "SET", "small:"+strconv.Itoa(i), "value "+strconv.Itoa(i))
		}
		for i := 0; i < 400_000; i++ {
			redisproc.WriteCommand(w, "XADD", "bigstream", "*", "type", "click", "user", strconv.Itoa(i%100000),
				"payload", "some payload text "+strconv.Itoa(i))
		}
		for i := 0; i < 12<<20/len(chunk); i++ {
			redisproc.WriteCommand(w, "APPEND", "bigstring", chunk)
		}
		big := strings.Repeat(chunk, 6<<20/len(chunk))
		redisproc.WriteCommand(w, "RPUSH", "biglist", "a", big, "b")
		redisproc.WriteCommand(w, "HSET", "bighash", "f", big, "g", "small")
		for i := 2000; i < 4000; i++ {
			redisproc.WriteCommand(w, "SET", "small:"+strconv.Itoa(i), "value "+strconv.Itoa(i))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	dump, err := srv.Save()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "big.rdb")
	if err := os.Rename(dump, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// largestValue is the size of the largest value: the larger of a record's
// bytes in the file and what the parser decodes of it at once (a string
// whole, once decompressed; a collection one element at a time).
func largestValue(t *testing.T, path string) int64 {
	t.Helper()
	p, err := rdb.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var largest, prev int64 = 0, -1
	for p.Next() {
		e := p.Entry()
		if prev >= 0 {
			largest = max(largest, e.Offset-prev)
		}
		prev = e.Offset
		if e.Type == rdb.String {
			v, err := p.Value()
			if err != nil {
				t.Fatal(err)
			}
			largest = max(largest, int64(len(v)))
			continue
		}
		err := p.Visit(func(el *rdb.Element) error {
			largest = max(largest, int64(len(el.Member)+len(el.Value)))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Err(); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	return max(largest, st.Size()-prev)
}

// TestRDBExportPeakMemory runs `sluice rdb json` on a snapshot with big
// values in its own process, in the default parallel mode, with
// --no-parallel and with --no-mmap, and checks its peak resident memory
// against the target: at most 64 MB plus the largest value. Both peaks
// are bounded: the resident one (VmHWM), what a user sees, and the
// anonymous one (RssAnon), what the export allocates. VmHWM counts the
// executable's clean file pages too, which follow the binary's layout,
// not the export: with grpc-go linked (its x/net/trace's templates keep
// every exported method) this run's VmHWM was 76 MB against 66 MB without,
// RssAnon unchanged at 31 MB (docs/perf/rdb.md); a binary that grows again
// fails here before the export does. The parallel mode once held a
// stream's whole JSON three times over (318 MB), the serial mode a 12 MB
// string's escaped JSON whole (108 MB): both anonymous memory.
func TestRDBExportPeakMemory(t *testing.T) {
	t.Parallel() // its own processes, directories and ports
	redisproc.Need(t)
	bin := buildSluice(t)
	path := bigValuesRDB(t)
	largest := largestValue(t, path)
	bound := int64(64<<20) + largest
	for _, mode := range [][]string{nil, {"--no-parallel"}, {"--no-mmap"}} {
		args := append(append([]string{"rdb", "json", "--no-progress"}, mode...), path)
		cmd := exec.Command(bin, args...)
		null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout = null
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		peak := procmem.SamplePeak(cmd.Process.Pid, "RssAnon")
		hwm := procmem.SamplePeak(cmd.Process.Pid, "VmHWM")
		err = cmd.Wait()
		null.Close()
		if err != nil {
			t.Fatalf("sluice %v: %v\n%s", args, err, stderr.String())
		}
		peakAnon, peakRSS := peak(), hwm()
		if peakAnon == 0 || peakRSS == 0 {
			t.Fatal("no RssAnon or VmHWM read from /proc")
		}
		t.Logf("%v: peak anonymous RSS %.1f MB, VmHWM %.1f MB (bound on the first %.1f MB: 64 + largest value %.1f MB)", mode, float64(peakAnon)/(1<<20), float64(peakRSS)/(1<<20), float64(bound)/(1<<20), float64(largest)/(1<<20))
		if peakAnon > bound {
			t.Errorf("sluice rdb json %v: peak anonymous RSS %.1f MB, over 64 MB + the largest value (%.1f MB)", mode, float64(peakAnon)/(1<<20), float64(largest)/(1<<20))
		}
		if peakRSS > bound {
			t.Errorf("sluice rdb json %v: peak resident memory (VmHWM) %.1f MB, over 64 MB + the largest value (%.1f MB): the export's or the binary's pages grew (docs/perf/binaries.md)", mode, float64(peakRSS)/(1<<20), float64(largest)/(1<<20))
		}
	}
}
