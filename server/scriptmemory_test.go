package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/procmem"
)

// scriptMemoryCases are hostile scripts that went past the
// memory limits: what each must fail with (in the log line of the failed
// row), on a column with the default memory_limit (256 MiB) and
// max_result_bytes (64 MiB).
var scriptMemoryCases = []struct {
	name, code, want string
	timeout          string // the column's (the table grows for longer than 2s on gopher-lua)
}{
	{"concat", `function main(row) local s = ("x"):rep(1048576) local t = {} for i = 1, 3000 do t[i] = s end return tostring(#table.concat(t)) end`, "memory", "2s"},
	// gopher-lua may refuse the string.rep already (luavm.Options.MaxStringSize
	// is a quarter of the heap budget, small under the server's GOMEMLIMIT)
	{"result", `function main(row) return ("x"):rep(200 * 1048576) end`, "max_result_bytes|string size limit", "2s"},
	// refused at its first string over the limit (luavm/concat.go), or
	// stopped by the watchdog before
	{"doubling", `function main(row) local s = "x" while true do s = s .. s end end`, "string size limit|memory|timeout", "2s"},
	{"table", `function main(row) local t = {} local i = 0 while true do i = i + 1 t[i] = i end end`, "memory", "60s"},
}

// doublingPeak bounds the doubling case's VmHWM on either engine: its
// concatenations are refused at the first string over the 256 MiB limit
// (gopher-lua measured 361 MiB, LuaJIT 498 MiB; gopher-lua peaked at
// 1137-1895 MiB when the watchdog alone stopped it, one 512 MiB or 1 GiB
// concatenation late).
const doublingPeak = 700 << 20

// testScriptMemory runs each case in its own server process on engine:
// the row is stored with the column null, the log names the limit, the
// server still answers /readyz 200, and the process's peak RSS (VmHWM)
// stays under peakBound (doublingPeak for the doubling string).
func testScriptMemory(t *testing.T, engine string, peakBound int64) {
	if testing.Short() {
		t.Skip("allocates hundreds of MB in child servers")
	}
	if raceEnabled {
		t.Skip("the race detector multiplies memory; scripts/test runs TestScriptMemoryGopherLua without -race")
	}
	for _, c := range scriptMemoryCases {
		t.Run(c.name, func(t *testing.T) {
			cfg := strings.Replace(stuckConfig(engine, c.code, "", "10s"), "type: bool", "type: string", 1)
			cfg = strings.Replace(cfg, "timeout: 1s", "timeout: "+c.timeout, 1)
			cmd, addr, stderr := startChildConfig(t, t.TempDir(), cfg)
			url := "http://" + addr
			waitReady(t, url)
			start := time.Now()
			status, res, _ := post(t, url+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(`{"user":"ann","ts":"2024-05-01T10:00:00Z"}`+"\n"))
			took := time.Since(start)
			peak, _ := procmem.Status(cmd.Process.Pid, "VmHWM")
			t.Logf("%s on %s: %d %v in %v, VmHWM %d MiB", c.name, engine, status, res, took.Round(time.Millisecond), peak>>20)
			if status != 200 || res["accepted"] != 1.0 {
				t.Errorf("ingest: %d %v", status, res)
			}
			_, body := get(t, url+"/v1/tables/events/query?columns=user,m")
			if rows := lines(body); len(rows) != 1 || rows[0]["m"] != nil {
				t.Errorf("stored: %.200q, want the row with m null", body)
			}
			if status, body := get(t, url+"/readyz"); status != http.StatusOK {
				t.Errorf("/readyz after the row: %d %s", status, body)
			}
			bound := peakBound
			if c.name == "doubling" {
				bound = min(bound, doublingPeak)
			}
			if peak > bound {
				t.Errorf("VmHWM %d MiB, want at most %d MiB", peak>>20, bound>>20)
			}
			// The table must be stopped by the memory limit, long before its
			// 60 s timeout; the others by either bound (on a loaded machine
			// the 2 s timeout may come first).
			if timeout, _ := time.ParseDuration(c.timeout); took > min(timeout, 20*time.Second)+8*time.Second {
				t.Errorf("the row took %v (timeout %s)", took, c.timeout)
			}
			sigterm(t, cmd, 20*time.Second)
			if log := stderr.String(); !containsAny(log, strings.Split(c.want, "|")) {
				t.Errorf("the log does not mention %q:\n%.3000s", c.want, log)
			}
		})
	}
}

func TestScriptMemoryGopherLua(t *testing.T) { testScriptMemory(t, "gopher-lua", 1200<<20) }

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
