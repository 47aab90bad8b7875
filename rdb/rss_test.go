package rdb

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// writeSyntheticFile writes a synthetic RDB of about size bytes to path
// without holding it in memory: syntheticRDB's records, in batches, with
// the checksum computed on the way.
func writeSyntheticFile(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	var crc uint64
	var written int64
	put := func(b []byte) error {
		crc = crc64Update(crc, b)
		written += int64(len(b))
		_, err := bw.Write(b)
		return err
	}
	batch := syntheticRDB(2000)
	// Strip the batch's own EOF and checksum; keep its header for the first write.
	body := batch[:len(batch)-9]
	if err := put(body); err != nil {
		return err
	}
	records := body[bytes.Index(body, []byte("user:0:name"))-2:] // type byte + key length
	for written < size {
		if err := put(records); err != nil {
			return err
		}
	}
	if err := put([]byte{opEOF}); err != nil {
		return err
	}
	if _, err := bw.Write(binary.LittleEndian.AppendUint64(nil, crc)); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return f.Close()
}

// maxPeakRSS is the parser's bound on its resident set (the target of
// docs/perf/rdb-parser.md, values here being small): a fraction of the
// file, so a parser that keeps what it read (or the mapped pages it
// parsed) passes it.
const maxPeakRSS = 64 << 20

// TestPeakRSS measures the peak resident set (VmHWM) of a child process
// parsing a file four times maxPeakRSS (RDB_RSS_SIZE bytes to choose
// another size, 1 GiB for the figures of docs/perf/rdb-parser.md) through
// Open with and without mmap, visiting or rejecting every entry, and wants
// each under maxPeakRSS. Not under -race, which multiplies memory.
func TestPeakRSS(t *testing.T) {
	if path := os.Getenv("RDB_RSS_CHILD"); path != "" {
		peakRSSChild(t, path)
		return
	}
	if raceEnabled {
		t.Skip("the race detector multiplies memory: run without -race (scripts/test does)")
	}
	size := int64(4 * maxPeakRSS)
	if s := os.Getenv("RDB_RSS_SIZE"); s != "" {
		size, _ = strconv.ParseInt(s, 10, 64)
	}
	path := filepath.Join(t.TempDir(), "big.rdb")
	if err := writeSyntheticFile(path, size); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"mmap", "read", "mmap-reject", "read-reject"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestPeakRSS$", "-test.v")
		cmd.Env = append(os.Environ(), "RDB_RSS_CHILD="+path, "RDB_RSS_MODE="+mode)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", mode, err, out)
		}
		found := false
		for _, line := range strings.Split(string(out), "\n") {
			if _, after, ok := strings.Cut(line, "peakRSS="); ok {
				found = true
				kb, err := strconv.ParseInt(strings.Fields(after)[0], 10, 64)
				if err != nil {
					t.Fatalf("%s: %q: %v", mode, line, err)
				}
				if kb<<10 > maxPeakRSS {
					t.Errorf("%s: peak RSS %d MiB for a %d MiB file, bound %d MiB", mode, kb>>10, size>>20, maxPeakRSS>>20)
				}
			}
			if strings.Contains(line, "peak RSS") {
				t.Log(strings.TrimSpace(line))
			}
		}
		if !found {
			t.Fatalf("%s: the child reported no peak RSS:\n%s", mode, out)
		}
	}
}

func peakRSSChild(t *testing.T, path string) {
	mode := os.Getenv("RDB_RSS_MODE")
	opts := &Options{NoMmap: strings.HasPrefix(mode, "read")}
	if strings.HasSuffix(mode, "reject") {
		opts.Filter = func(*Entry) bool { return false }
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	p, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	n, err := visitAll(p)
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	el := time.Since(start)
	status, _ := os.ReadFile("/proc/self/status")
	hwm := ""
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			hwm = strings.TrimSpace(strings.TrimPrefix(line, "VmHWM:"))
		}
	}
	t.Logf("%s: peak RSS %s for a %d MiB file, %.0f MB/s, %d bytes visited", mode, hwm,
		fi.Size()>>20, float64(fi.Size())/el.Seconds()/1e6, n)
	t.Log("peakRSS=" + strings.TrimSuffix(hwm, " kB") + " kB")
}
