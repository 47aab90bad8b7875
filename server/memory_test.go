package server

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/procmem"
)

// memBody is an NDJSON body of about size bytes: the 10-field rows of
// `sluice bench ingest` (a time, 4 strings, 2 floats, 2 ints, a bool).
func memBody(size int, seed int) []byte {
	var b bytes.Buffer
	b.Grow(size + 512)
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, `{"ts":%d,"user":"user-%d","country":"c%d","action":"act%d","session":"s-%d-%08x","amount":%d.%02d,"score":%g,"n":%d,"m":%d,"ok":%t}`+"\n",
			1714557600+i%86400, (i*7+seed)%1000, i%50, i%20, seed, i*2654435761%(1<<32), i%1000, i%100, float64(i)/7, i, i*3, i%2 == 0)
	}
	return b.Bytes()
}

// TestIngestMemoryBound runs a real server process, sends it max_inflight
// bodies of almost max_body_bytes at once (twice), and checks the process's
// peak anonymous RSS (RssAnon of the child, sampled every few ms) against a
// literal 256 MiB, the bound docs/server.md states for these cases (each has
// max_inflight × max_body_bytes = 64 MiB). The figure is RssAnon, not VmHWM:
// see memoryBound. What keeps it: the batch decoded and encoded in parts
// (partRows) and the GC soft limit `sluice serve` sets. Without the parts
// the peaks were 471-514 MiB, without the soft limit 228-325 MiB (three of
// the four cases over); before the batch was decoded in parts into columns,
// two 32 MiB bodies peaked at 590 MiB and one 64 MiB body at 828 MiB
// (docs/server.md, "Memory").
func TestIngestMemoryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 256 MB through child servers")
	}
	if raceEnabled {
		t.Skip("the race detector multiplies memory; scripts/test runs this test without -race")
	}
	for _, c := range []struct {
		maxBody  int64
		inflight int
		ctype    string
		gzip     bool // max_body_bytes bounds the inflated body: a small wire body
	}{
		{32 << 20, 2, "application/x-ndjson", false},
		{64 << 20, 1, "application/x-ndjson", false},
		{64 << 20, 1, "application/json", false},
		{64 << 20, 1, "application/x-ndjson", true},
	} {
		name := fmt.Sprintf("%dx%dMiB-%s", c.inflight, c.maxBody>>20, c.ctype[12:])
		if c.gzip {
			name += "-gzip"
		}
		t.Run(name, func(t *testing.T) { memoryBound(t, c.maxBody, c.inflight, c.ctype, c.gzip) })
	}
}

// jsonArray turns an NDJSON body into a JSON array of the same rows.
func jsonArray(nd []byte) []byte {
	out := make([]byte, 0, len(nd)+2)
	out = append(out, '[')
	out = append(out, bytes.ReplaceAll(bytes.TrimSuffix(nd, []byte("\n")), []byte("\n"), []byte(",\n"))...)
	return append(out, ']')
}

// anonBound is the documented peak of anonymous RSS for max_inflight ×
// max_body_bytes = 64 MiB (docs/server.md, "Memory"): a literal, not the
// code's own formula.
const anonBound = 256 << 20

func memoryBound(t *testing.T, maxBody int64, inflight int, ctype string, gz bool) {
	cfg := fmt.Sprintf(`
listen: {http: "127.0.0.1:0"}
limits: {max_body_bytes: %d, max_inflight: %d, read_timeout: 60s, write_timeout: 120s}
tables:
  - name: events
    hashBy: user
    sortBy: ts
`, maxBody, inflight)
	cmd, addr, stderr := startChildConfig(t, t.TempDir(), cfg)
	url := "http://" + addr
	waitReady(t, url)
	var bodies [][]byte
	for i := range inflight {
		b := memBody(int(maxBody)-(1<<20), i)
		if ctype == "application/json" {
			b = jsonArray(b)
		}
		if gz {
			var z bytes.Buffer
			zw := gzip.NewWriter(&z)
			zw.Write(b)
			zw.Close()
			b = z.Bytes()
		}
		bodies = append(bodies, b)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Minute}
	anonPeak := procmem.SamplePeak(cmd.Process.Pid, "RssAnon")
	for round := 0; round < 2; round++ {
		var wg sync.WaitGroup
		for i := range inflight {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := client.Post(url+"/v1/tables/events/rows", ctype, bytes.NewReader(bodies[i]))
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Errorf("body %d: %d %s", i, resp.StatusCode, b)
				}
			}()
		}
		wg.Wait()
	}
	// The child's own peak of anonymous memory (RssAnon, sampled): what the
	// batches hold. Not VmHWM: it also counts the executable's pages that
	// were read in, and since the cold tier linked iceberg-go (and the cloud
	// SDKs it brings) the binary is ~210 MB, of which a bare start touches
	// ~130 MB of shared, clean page cache. Not getrusage's ru_maxrss either:
	// Go starts children with vfork, and Linux carries the high-water mark
	// of the address space left at exec (this test's) into the child's.
	hwm, ok := procmem.Status(cmd.Process.Pid, "VmHWM")
	if !ok {
		t.Fatalf("no VmHWM in /proc/%d/status", cmd.Process.Pid)
	}
	peak := anonPeak()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v\n%s", err, stderr.String())
	}
	t.Logf("VmHWM %d MiB (with the executable's pages; not bounded)", hwm>>20)
	t.Logf("peak anonymous RSS %d MiB with %d bodies of %d MiB in flight (bound %d MiB)", peak>>20, inflight, maxBody>>20, anonBound>>20)
	if got := MemoryBound(maxBody, inflight); got != anonBound {
		t.Fatalf("MemoryBound(%d MiB, %d) = %d MiB: this case no longer measures the documented 256 MiB", maxBody>>20, inflight, got>>20)
	}
	if v := os.Getenv("SLUICE_MEM_REPORT"); v != "" {
		f, _ := os.OpenFile(v, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		fmt.Fprintf(f, "%d %d %d\n", maxBody, inflight, peak)
		f.Close()
	}
	if peak > anonBound {
		t.Fatalf("peak anonymous RSS %d MiB is over the documented bound %d MiB", peak>>20, anonBound>>20)
	}
}
