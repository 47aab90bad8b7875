package table

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// crashChildEnv, when set to a directory, makes the test binary a child
// that appends numbered batches to a store there and prints "ack N" after
// each Append returns, until it is killed.
const crashChildEnv = "SLUICE_TABLE_CRASH_CHILD"

// crashStartEnv is the first batch number of the child.
const crashStartEnv = "SLUICE_TABLE_CRASH_START"

const (
	crashBatchRows  = 400
	crashPartitions = 8
)

func crashBatch(n int) []Row {
	rows := make([]Row, crashBatchRows)
	for j := range rows {
		rows[j] = Row{
			"batch": int64(n), "j": int64(j), "p": fmt.Sprintf("p%d", j%crashPartitions),
			// two hours per batch: every batch is 2×8 blocks
			"ts":      t0.Add(time.Duration(n)*time.Minute + time.Duration(j%2)*time.Hour).Unix(),
			"payload": strings.Repeat("x", j%50),
		}
	}
	return rows
}

func crashChild(dir string) {
	s, err := Open(dir, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	tb, err := s.Table(Config{Name: "crash", HashBy: "p", SortBy: "ts"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	start, _ := strconv.Atoi(os.Getenv(crashStartEnv))
	deadline := time.Now().Add(60 * time.Second) // never outlive a broken parent for long
	for n := start; time.Now().Before(deadline); n++ {
		if err := tb.Append(context.Background(), crashBatch(n)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Printf("ack %d\n", n) // os.Stdout is unbuffered: written before the next Append
	}
	os.Exit(3)
}

// TestKill9LosesNoAcknowledgedBatch kills a real process appending to the
// store with SIGKILL and checks that every acknowledged batch is wholly
// present and no batch is partly present.
func TestKill9LosesNoAcknowledgedBatch(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	dir := t.TempDir()
	acked := map[int64]bool{}
	inFlight := map[int64]bool{} // batches killed after the commit, before "ack"
	// Each round appends to the store the previous one recovered and kills
	// the child a little later after an acknowledgement, to land at
	// different points of a batch (building, committing, syncing).
	delays := []time.Duration{0, 300 * time.Microsecond, time.Millisecond, 2 * time.Millisecond, 3500 * time.Microsecond, 5 * time.Millisecond}
	for round, delay := range delays {
		start := round * 1000
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir, crashStartEnv+"="+strconv.Itoa(start))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		last := -1
		ack := func(line string) {
			n, err := strconv.Atoi(strings.TrimPrefix(line, "ack "))
			if err != nil {
				t.Errorf("child said %q", line)
				return
			}
			acked[int64(n)] = true
			last = n
		}
		for sc.Scan() {
			ack(sc.Text())
			if last >= start+25 {
				break
			}
		}
		time.Sleep(delay)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		for sc.Scan() { // acknowledgements written before the kill count too
			ack(sc.Text())
		}
		err = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("child did not die of SIGKILL: %v", err)
		}
		if last < start+25 {
			t.Fatalf("round %d: child acknowledged only up to batch %d", round, last)
		}

		s := openStore(t, dir)
		tb, err := s.Table(Config{Name: "crash", HashBy: "p", SortBy: "ts"})
		if err != nil {
			t.Fatal(err)
		}
		count := map[int64]int{}
		seen := map[[2]int64]bool{}
		err = tb.Query(context.Background(), Query{Columns: []string{"batch", "j"}}, func(r Row) error {
			b, j := r["batch"].(int64), r["j"].(int64)
			if seen[[2]int64{b, j}] {
				return fmt.Errorf("row %d of batch %d twice", j, b)
			}
			seen[[2]int64{b, j}] = true
			count[b]++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for b := range acked {
			if count[b] != crashBatchRows {
				t.Fatalf("round %d: acknowledged batch %d has %d of %d rows", round, b, count[b], crashBatchRows)
			}
		}
		for b, c := range count {
			if c != crashBatchRows {
				t.Fatalf("round %d: batch %d is partly present: %d of %d rows", round, b, c, crashBatchRows)
			}
			if !acked[b] && b == int64(last+1) {
				inFlight[b] = true
			}
			if !acked[b] && !inFlight[b] {
				t.Fatalf("round %d: batch %d present but neither acknowledged nor in flight (last ack %d)", round, b, last)
			}
		}
		t.Logf("round %d: %d batches acknowledged in all, %d present", round, len(acked), len(count))
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
