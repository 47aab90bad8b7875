package server

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluicedb/sluice/luavm"
)

// stuckCall is a script call told to stop (timeout, cancel) that still runs
// after luavm.DefaultStuckAfter, with the tables and columns that run the
// script: a stream partition or an ingest slot it holds goes nowhere.
type stuckCall struct {
	luavm.StuckCall
	// Where lists `table "t" column "c"` for each function whose script it
	// is (two tables may share a script name), or the script's source when
	// none is known.
	Where []string
	// Tables are the tables of Where.
	Tables []string
}

func (c stuckCall) String() string {
	return fmt.Sprintf("%s: a call of %s was told to stop %s ago and still runs", strings.Join(c.Where, ", "), c.Source, c.For.Round(time.Second))
}

// stuckCalls gathers the stuck calls of both Lua engines.
func (s *Server) stuckCalls() []stuckCall {
	var calls []luavm.StuckCall
	if s.lua != nil {
		calls = append(calls, s.lua.Stuck()...)
	}
	if j, ok := s.jit.(interface{ Stuck() []luavm.StuckCall }); ok {
		calls = append(calls, j.Stuck()...)
	}
	if len(calls) == 0 {
		return nil
	}
	out := make([]stuckCall, 0, len(calls))
	for _, c := range calls {
		sc := stuckCall{StuckCall: c}
		for _, n := range s.names {
			p := s.tables[n].proc
			if p == nil {
				continue
			}
			for _, st := range p.Stats() {
				// The script's source name is the file or URL, or the
				// column's name for inline code (compute.sourceName).
				source := st.Source
				if source == "inline" {
					source = st.Name
				}
				if st.Loader != "lua" || source != c.Source {
					continue
				}
				what := "column"
				if st.Filter {
					what = "filter"
				}
				sc.Where = append(sc.Where, fmt.Sprintf("table %q %s %q", n, what, st.Name))
				if len(sc.Tables) == 0 || sc.Tables[len(sc.Tables)-1] != n {
					sc.Tables = append(sc.Tables, n)
				}
			}
		}
		if len(sc.Where) == 0 {
			sc.Where = []string{fmt.Sprintf("script %q", c.Source)}
		}
		out = append(out, sc)
	}
	return out
}
