//go:build luajit && cgo

package luajit

import (
	"context"
	"encoding/json"
	"log/slog"
	"sort"
	"strings"
	"unsafe"

	"github.com/sluicedb/sluice/luavm"
)

// hostDoc is what host.lua's flushside writes after a batch: the batch's
// log lines (each [level, msg, row, line, fields JSON or false]), the lines
// over its share of the rate limit, and its stats calls summed per series
// key (name, then "\0label=value" pairs sorted by label).
type hostDoc struct {
	Logs    [][5]json.RawMessage `json:"logs"`
	Dropped int                  `json:"dropped"`
	C       map[string]float64   `json:"c"`
	G       map[string]float64   `json:"g"`
	H       map[string][]float64 `json:"h"`
	CN      map[string]int       `json:"cn"`
	GN      map[string]int       `json:"gn"`
}

// hostCalls hands the batch's log lines and stats to the script's Host,
// and gives back the log lines of room it did not use. A batch whose
// script called neither costs the reading of one field.
func (v *vm) hostCalls(ctx context.Context, room int) {
	h := v.s.host
	b := v.b
	if b.side_len == 0 {
		h.Refund(room)
		return
	}
	raw := unsafe.Slice((*byte)(unsafe.Pointer(b.out)), b.out_len)[b.side_off : b.side_off+b.side_len]
	var doc hostDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		// only from a bug of host.lua: its calls are lost, not the rows
		h.Refund(room)
		return
	}
	h.Refund(room - len(doc.Logs))
	h.Suppressed(doc.Dropped)
	locate := luavm.RowLocatorOf(ctx)
	for _, e := range doc.Logs {
		var level, msg string
		var row, line int
		_ = json.Unmarshal(e[0], &level)
		_ = json.Unmarshal(e[1], &msg)
		_ = json.Unmarshal(e[2], &row)
		_ = json.Unmarshal(e[3], &line)
		lvl, _ := luavm.LevelOf(level)
		var attrs []slog.Attr
		var fields string
		if json.Unmarshal(e[4], &fields) == nil {
			var m map[string]any
			if json.Unmarshal([]byte(fields), &m) == nil {
				for _, k := range sortedKeys(m) {
					attrs = append(attrs, slog.Any(k, m[k]))
				}
			}
		}
		if v.cb != nil && row >= 0 && row < len(v.idx) {
			row = v.idx[row] // the batch's row, as ProcessColumns' locator counts
		}
		h.Write(ctx, lvl, msg, line, locate, row, attrs)
	}
	// In the order of the keys, so that which series a full cap drops
	// does not change from run to run.
	for _, key := range sortedKeys(doc.C) {
		v.series(luavm.Counter, key, doc.CN[key]).Add(doc.C[key])
	}
	for _, key := range sortedKeys(doc.G) {
		v.series(luavm.Gauge, key, doc.GN[key]).Add(doc.G[key])
	}
	for _, key := range sortedKeys(doc.H) {
		xs := doc.H[key]
		s := v.series(luavm.Histogram, key, len(xs))
		for _, x := range xs {
			s.Add(x)
		}
	}
}

func sortedKeys[T any](m map[string]T) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// series is the Host's series of kind for a key of host.lua's, through
// the VM's cache; nil when the series cap drops it, and then the calls
// made on it in the batch are counted as dropped.
func (v *vm) series(kind, key string, calls int) *luavm.Series {
	if s, ok := v.seriesCache[kind+key]; ok {
		return s
	}
	parts := strings.Split(key, "\x00")
	var labels []string
	for _, p := range parts[1:] {
		k, val, _ := strings.Cut(p, "=")
		labels = append(labels, k, val)
	}
	s, err := v.s.host.Series(kind, parts[0], labels)
	if err != nil || s == nil {
		// names were checked in the VM; nil: the cap, which counted one
		// call
		v.s.host.DroppedCalls(calls - 1)
		return nil
	}
	if v.seriesCache == nil {
		v.seriesCache = make(map[string]*luavm.Series)
	}
	v.seriesCache[kind+key] = s
	return s
}
