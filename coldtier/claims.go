package coldtier

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go"

	"github.com/sluicedb/sluice/table"
)

// Claims: which store committed which source offsets into the Iceberg table.
//
// A row a stream stored carries its source partition, the offsets [first,
// end) of the batch it was stored with, and its message's offset
// (table.SourceBatchColumn, table.SourceOffsetColumn). Two stores may hold
// the same message (a node killed after storing it and before the group
// saw its offset commit; a partition that moved; a store wiped and
// refilled from the committed offset). The Iceberg table's properties say,
// per source partition and per store (table.Store.WriterID), which offsets
// that store committed: the property
//
//	sluice.claims.<source> = <writer>:<lo>-<hi>,<lo>-<hi>;<writer>:...
//
// holds merged half-open ranges. A run skips every row whose offset
// another writer claimed, claims the batch ranges of the rows it writes
// (minus what others claimed), and commits the new claims with its files in
// one catalog commit that fails if anything was committed since the run
// read them (AssertRefSnapshotID): the run then reads them again, and
// rewrites its files only if the new claims cover offsets it wrote. A
// writer never skips its own claims: a message whose rows fall in two runs
// of one store (time-mode runs cut by event time) is committed by both.
// Table properties rather than snapshot summaries: they survive commits
// of other writers (a file rewrite, another engine) and snapshot expiry.

// propClaims prefixes the claims property of a source.
const propClaims = "sluice.claims."

// span is a half-open range [lo, hi) of offsets.
type span struct{ lo, hi int64 }

// spans are sorted, disjoint, non-adjacent ranges.
type spans []span

// add returns s with [lo, hi) added (merged with what it touches).
func (s spans) add(lo, hi int64) spans {
	if lo >= hi {
		return s
	}
	i := 0
	for i < len(s) && s[i].hi < lo {
		i++
	}
	j := i
	for j < len(s) && s[j].lo <= hi {
		lo, hi = min(lo, s[j].lo), max(hi, s[j].hi)
		j++
	}
	return slices.Insert(slices.Delete(slices.Clone(s), i, j), i, span{lo, hi})
}

// union returns s with every range of o added.
func (s spans) union(o spans) spans {
	for _, r := range o {
		s = s.add(r.lo, r.hi)
	}
	return s
}

// contains reports whether offset x is in s.
func (s spans) contains(x int64) bool {
	i, _ := slices.BinarySearchFunc(s, x, func(r span, x int64) int {
		switch {
		case r.hi <= x:
			return -1
		case r.lo > x:
			return 1
		}
		return 0
	})
	return i < len(s) && s[i].lo <= x && x < s[i].hi
}

// minus returns s without the offsets of o.
func (s spans) minus(o spans) spans {
	var out spans
	for _, r := range s {
		lo := r.lo
		for _, c := range o {
			if c.hi <= lo || c.lo >= r.hi {
				continue
			}
			if c.lo > lo {
				out = append(out, span{lo, c.lo})
			}
			lo = max(lo, c.hi)
		}
		if lo < r.hi {
			out = append(out, span{lo, r.hi})
		}
	}
	return out
}

// overlaps reports whether s and o share an offset.
func (s spans) overlaps(o spans) bool {
	for _, r := range s {
		for _, c := range o {
			if c.lo < r.hi && r.lo < c.hi {
				return true
			}
		}
	}
	return false
}

func (s spans) String() string {
	var b strings.Builder
	for i, r := range s {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(r.lo, 10))
		b.WriteByte('-')
		b.WriteString(strconv.FormatInt(r.hi, 10))
	}
	return b.String()
}

func parseSpans(v string) (spans, error) {
	var s spans
	for part := range strings.SplitSeq(v, ",") {
		if part == "" {
			continue
		}
		a, b, ok := strings.Cut(part, "-")
		lo, err1 := strconv.ParseInt(a, 10, 64)
		hi, err2 := strconv.ParseInt(b, 10, 64)
		if !ok || err1 != nil || err2 != nil || lo > hi {
			return nil, fmt.Errorf("range %q is not <lo>-<hi>", part)
		}
		s = s.add(lo, hi)
	}
	return s, nil
}

// claims are, per source, per writer, the offsets it committed.
type claims map[string]map[string]spans

// readClaims reads the claims properties of a table.
func readClaims(props iceberg.Properties) (claims, error) {
	c := claims{}
	for k, v := range props {
		source, ok := strings.CutPrefix(k, propClaims)
		if !ok {
			continue
		}
		byWriter := map[string]spans{}
		for part := range strings.SplitSeq(v, ";") {
			if part == "" {
				continue
			}
			writer, ranges, ok := strings.Cut(part, ":")
			s, err := parseSpans(ranges)
			if !ok || err != nil {
				return nil, fmt.Errorf("coldtier: table property %s: %q is not <writer>:<ranges> (%v)", k, part, err)
			}
			byWriter[writer] = s
		}
		c[source] = byWriter
	}
	return c, nil
}

// foreign is the union of the offsets of source claimed by writers other
// than writer.
func (c claims) foreign(source, writer string) spans {
	var s spans
	for w, r := range c[source] {
		if w != writer {
			s = s.union(r)
		}
	}
	return s
}

// property is the claims property value of source.
func (c claims) property(source string) string {
	writers := make([]string, 0, len(c[source]))
	for w, s := range c[source] {
		if len(s) > 0 {
			writers = append(writers, w)
		}
	}
	slices.Sort(writers)
	var b strings.Builder
	for i, w := range writers {
		if i > 0 {
			b.WriteByte(';')
		}
		b.WriteString(w)
		b.WriteByte(':')
		b.WriteString(c[source][w].String())
	}
	return b.String()
}

// batchTag is a row's table.SourceBatchColumn value parsed:
// "<source>@<first>-<end>".
type batchTag struct {
	source string
	batch  span
}

func parseBatchTag(v string) (batchTag, bool) {
	i := strings.LastIndexByte(v, '@')
	if i < 0 {
		return batchTag{}, false
	}
	s, err := parseSpans(v[i+1:])
	if err != nil || len(s) != 1 {
		return batchTag{}, false
	}
	return batchTag{source: v[:i], batch: s[0]}, true
}

// runClaims follows one run's rows: it tells which rows to skip (their
// offset claimed by another writer) and gathers the batch ranges of the
// rows written, per source.
type runClaims struct {
	writer string
	// known are the claims the run read (from the table it stages on).
	known claims
	// foreign caches known.foreign per source.
	foreign map[string]spans
	// written are the batch ranges of the rows written, per source.
	written map[string]spans
	// tags caches the last parsed batch tag (rows of one block share it).
	lastTag string
	last    batchTag
	lastOK  bool
	skipped int64
}

func newRunClaims(writer string, known claims) *runClaims {
	return &runClaims{writer: writer, known: known, foreign: map[string]spans{}, written: map[string]spans{}}
}

// keep is the row filter of a run: batch and offset are the row's source
// columns (nil for a row that came without them: HTTP ingest, rows stored
// before). It returns false for a row another writer committed.
func (rc *runClaims) keep(batch, offset any) bool {
	tag, ok := batch.(string)
	off, ok2 := offset.(int64)
	if !ok || !ok2 {
		return true
	}
	if tag != rc.lastTag {
		rc.lastTag = tag
		rc.last, rc.lastOK = parseBatchTag(tag)
	}
	if !rc.lastOK {
		return true
	}
	src := rc.last.source
	f, cached := rc.foreign[src]
	if !cached {
		f = rc.known.foreign(src, rc.writer)
		rc.foreign[src] = f
	}
	if f.contains(off) {
		rc.skipped++
		return false
	}
	if w := rc.written[src]; len(w) == 0 || !w.contains(off) {
		rc.written[src] = w.add(rc.last.batch.lo, rc.last.batch.hi)
	}
	return true
}

// update returns the claims properties to commit on a table whose claims
// are now: for each source written, this writer's ranges grown by the
// batch ranges written minus what others claimed. conflict is true when
// another writer claimed, since the run read the claims, an offset of a
// batch the run wrote: its files may hold rows that writer committed, and
// must be written again.
func (rc *runClaims) update(now claims) (props iceberg.Properties, conflict bool) {
	props = iceberg.Properties{}
	for src, w := range rc.written {
		before := rc.known.foreign(src, rc.writer)
		after := now.foreign(src, rc.writer)
		if w.minus(before).overlaps(after) {
			return nil, true
		}
		mine := now[src][rc.writer].union(w.minus(after))
		if now[src] == nil {
			now[src] = map[string]spans{}
		}
		now[src][rc.writer] = mine
		props[propClaims+src] = now.property(src)
	}
	return props, false
}

// hotFilter is the filter of the hot side of a query: it drops the rows
// whose offset another writer claimed (committed to the cold tier by
// another node), since the cold side returns them.
type hotFilter struct {
	foreign map[string]spans
	batch   int // index of table.SourceBatchColumn in the hot row
	offset  int // index of table.SourceOffsetColumn
	lastTag string
	last    batchTag
	lastOK  bool
}

func newHotFilter(c claims, writer string) *hotFilter {
	f := &hotFilter{foreign: map[string]spans{}}
	for src := range c {
		if s := c.foreign(src, writer); len(s) > 0 {
			f.foreign[src] = s
		}
	}
	if len(f.foreign) == 0 {
		return nil
	}
	return f
}

func (f *hotFilter) keep(vals []any) bool {
	tag, ok := vals[f.batch].(string)
	off, ok2 := vals[f.offset].(int64)
	if !ok || !ok2 {
		return true
	}
	if tag != f.lastTag {
		f.lastTag = tag
		f.last, f.lastOK = parseBatchTag(tag)
	}
	return !f.lastOK || !f.foreign[f.last.source].contains(off)
}

// visible are the columns of cols the cold tier writes (not hidden).
func visible(cols []table.Column) []table.Column {
	out := make([]table.Column, 0, len(cols))
	for _, c := range cols {
		if !table.Hidden(c.Name) {
			out = append(out, c)
		}
	}
	return out
}

// sourceColumns are the source columns of cols, the batch's first.
func sourceColumns(cols []table.Column) []table.Column {
	var out []table.Column
	for _, name := range []string{table.SourceBatchColumn, table.SourceOffsetColumn} {
		if i := slices.IndexFunc(cols, func(c table.Column) bool { return c.Name == name }); i >= 0 {
			out = append(out, cols[i])
		}
	}
	return out
}

// hasSourceColumns reports whether cols has both source columns.
func hasSourceColumns(cols []table.Column) bool {
	n := 0
	for _, c := range cols {
		if c.Name == table.SourceBatchColumn || c.Name == table.SourceOffsetColumn {
			n++
		}
	}
	return n == 2
}
