package compute

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestRunJSONLines(t *testing.T) {
	p := newProcessor(t, `
filters:
  - {name: no_test, func: "function main(row) return row.event ~= 'test' end"}
computed:
  - {name: n2, type: int64, on_error: reject, func: "function main(row) if row.n == 13 then error('unlucky') end return row.n * 2 end"}
  - {name: s, type: string, on_error: deadletter, func: "function main(row) return row.s end"}
`, Options{})
	// Batches hold 2 decoded rows: (1,2) (3,6) (7,8) (9).
	in := strings.Join([]string{
		`{"n":1,"s":"a","big":9007199254740993}`,
		`{"n":2,"s":"b","event":"test"}`, // filtered out
		`{"n":3}`,                        // s is nil: dead letter
		`not json`,                       // bad line: dead letter
		``,
		`{"n":4,"s":"d"}`,
		`{"n":13,"s":"x"}`, // rejects its batch: this row and the next are dead letters
		`{"n":14,"s":"y"}`,
		`{"n":15,"s":"z"}`,
	}, "\n") // no final newline: the last line still counts
	var out, dead bytes.Buffer
	sum, err := RunJSONLines(context.Background(), p, strings.NewReader(in), &out, &dead, 2)
	if err != nil {
		t.Fatal(err)
	}
	wantOut := `{"big":9007199254740993,"n":1,"n2":2,"s":"a"}` + "\n" + `{"n":4,"n2":8,"s":"d"}` + "\n" + `{"n":15,"n2":30,"s":"z"}` + "\n"
	if out.String() != wantOut {
		t.Errorf("out:\n%s\nwant:\n%s", out.String(), wantOut)
	}
	if sum.LinesIn != 9 || sum.RowsOut != 3 || sum.BadLines != 1 || sum.Dropped != 1 || sum.RejectedBatches != 1 || sum.RejectedRows != 2 || sum.DeadLetters != 4 {
		t.Errorf("summary %+v", sum)
	}
	dl := dead.String()
	for _, want := range []string{`{"row":{"n":3,"n2":6},"column":"s","loader":"lua"`, `line 4:`, `batch of lines 7-8 rejected`, `unlucky`, `"row":{"n":14,"s":"y"}`} {
		if !strings.Contains(dl, want) {
			t.Errorf("dead letters lack %s:\n%s", want, dl)
		}
	}
	var summary bytes.Buffer
	if err := WriteSummary(&summary, sum, p.Stats()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(summary.String(), "9 lines in, 3 rows out") || !strings.Contains(summary.String(), "column  n2") {
		t.Errorf("summary:\n%s", summary.String())
	}
}

func TestRunJSONLinesLongLine(t *testing.T) {
	p := newProcessor(t, "computed:\n  - {name: l, type: int64, func: \"function main(row) return #row.s end\"}\n", Options{})
	long := strings.Repeat("x", 1<<20)
	var out bytes.Buffer
	sum, err := RunJSONLines(context.Background(), p, strings.NewReader(`{"s":"`+long+`"}`+"\n"), &out, nil, 0)
	if err != nil || sum.RowsOut != 1 || !strings.Contains(out.String(), `"l":1048576`) {
		t.Errorf("%+v %v", sum, err)
	}
}

// TestWriteSummaryOneLinePerFunction: a multi-line last error (a plugin's
// stack trace) must not break the table.
func TestWriteSummaryOneLinePerFunction(t *testing.T) {
	var out strings.Builder
	stats := []Stats{
		{Name: "a", Loader: "plugin", Errors: 1, LastError: "plugin panicked: boom\ngoroutine 1 [running]:\n\tmain.F()\n"},
		{Name: "b", Loader: "lua"},
	}
	if err := WriteSummary(&out, Summary{}, stats); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2+len(stats) || !strings.Contains(lines[2], "plugin panicked: boom ...") {
		t.Fatalf("summary is not one line per function:\n%s", out.String())
	}
}
