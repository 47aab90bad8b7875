package poolbench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain doubles as the child process of TestRunCell: with
// POOLBENCH_CHILD=1 the test binary runs the cell given as its last argument,
// as `sluice bench pool --child` does.
func TestMain(m *testing.M) {
	if os.Getenv("POOLBENCH_CHILD") == "1" {
		var cell Cell
		if err := json.Unmarshal([]byte(os.Args[len(os.Args)-1]), &cell); err != nil {
			os.Stderr.WriteString(err.Error())
			os.Exit(2)
		}
		if err := RunChild(cell, os.Stdout); err != nil {
			os.Stderr.WriteString(err.Error())
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

func TestRunCell(t *testing.T) {
	t.Setenv("POOLBENCH_CHILD", "1")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, strategy := range []string{"default", "simple-chan2"} {
		cell := Cell{Strategy: strategy, Mode: ModeHot, Goroutines: 8, CPUs: 2, Duration: 50 * time.Millisecond, Count: 1}
		res, err := RunCell(context.Background(), exe, []string{"-test.run=^$"}, cell)
		if err != nil {
			t.Fatal(err)
		}
		if res.Ops < 1 || res.NsPerOp <= 0 || res.CPUNsPerOp <= 0 || res.MaxRSS < 1<<20 || res.Strategy != strategy {
			t.Fatalf("implausible result %+v", res)
		}
		if strategy == "default" && res.VMs < 1 {
			t.Fatalf("default: no VM count in %+v", res)
		}
	}
	_, err = RunCell(context.Background(), exe, []string{"-test.run=^$"}, Cell{Strategy: "core0+nonsense", Mode: ModeHot, Goroutines: 1, CPUs: 1, Duration: time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "core0+nonsense") {
		t.Fatalf("bad strategy: %v", err)
	}
}

func TestTables(t *testing.T) {
	results := []Result{
		{Cell: Cell{Strategy: "default", Mode: ModeHot, Goroutines: 4000, CPUs: 2}, NsPerOp: 200, CPUNsPerOp: 390, PBusy: 97, Waits: 0.00125, Locks: 0.0002, VMs: 93, BytesPerOp: 3, CPUAvg: 199, CPUPeak: 200, MaxRSS: 40 << 20},
		{Cell: Cell{Strategy: "none", Mode: ModeHot, Goroutines: 4000, CPUs: 2}, Err: "boom|x\nmore"},
	}
	var md, csv bytes.Buffer
	if err := WriteMarkdown(&md, results); err != nil {
		t.Fatal(err)
	}
	if err := WriteCSV(&csv, results); err != nil {
		t.Fatal(err)
	}
	wantMD := "| default | hot | 2 | 4000 | 200 | 390 | 2564103 | 97 | 201 | 3 | 0 | 199 | 200 | 40.0 | 0.0013 | 0.0002 | 93 |\n| none | hot | 2 | 4000 | error: boom/x |"
	if !strings.Contains(md.String(), wantMD) {
		t.Fatalf("markdown:\n%s\nwant it to contain\n%s", md.String(), wantMD)
	}
	if !strings.Contains(csv.String(), "default,hot,2,4000,200,390,2564103,97,201,3,0,199,200,40.0,0.0013,0.0002,93\n") {
		t.Fatalf("csv:\n%s", csv.String())
	}
}

func TestGrid(t *testing.T) {
	cells := Grid([]string{"default", "simple-chan2"}, []Mode{ModeHot, ModeReport}, []int{1000, 4000}, []int{2}, time.Second, 1)
	// simple-* has no report mode: 2 goroutine counts × (2 + 1).
	if len(cells) != 6 {
		t.Fatalf("%d cells: %v", len(cells), cells)
	}
}
