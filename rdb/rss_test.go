package rdb

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
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

// TestPeakRSS measures the peak resident set of a child process parsing a
// large file (RDB_RSS_SIZE bytes, default 1 GiB) through Open with and
// without mmap. It only runs when RDB_RSS=1 (it writes a big file and takes
// a while); the figures go to docs/perf/rdb-parser.md.
func TestPeakRSS(t *testing.T) {
	if path := os.Getenv("RDB_RSS_CHILD"); path != "" {
		peakRSSChild(t, path)
		return
	}
	if os.Getenv("RDB_RSS") != "1" {
		t.Skip("set RDB_RSS=1 to measure peak RSS on a large file")
	}
	size := int64(1 << 30)
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
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, "peak RSS") {
				t.Log(strings.TrimSpace(line))
			}
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
	t.Log(fmt.Sprintf("%s: peak RSS %s for a %d MiB file, %.0f MB/s, %d bytes visited", mode, hwm,
		fi.Size()>>20, float64(fi.Size())/el.Seconds()/1e6, n))
}
