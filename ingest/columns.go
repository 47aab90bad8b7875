package ingest

import (
	"fmt"
	"io"
	"sync"
	"unsafe"

	"github.com/sluicedb/sluice/compute"
	"github.com/sluicedb/sluice/internal/colbatch"
)

// Rows by column. Decode makes a map[string]any per row, with its values
// boxed: for a table without computed columns or filters that map was the
// largest cost of ingest (making it, filling it, the table's lookups of
// every column in it, and the garbage: docs/server.md, "Scaling with
// cores"). DecodeColumns writes each JSON value straight into a cell of its
// column instead, strings into one arena per batch, and the table converts
// the columns without a lookup per value (table.Appender.AddColumns).

// DecodeColumns is Decode with the rows given by column: emit receives a
// batch of at most BatchRows rows (all rows when 0) that it may use only
// until it returns (the batch's memory is reused for the next rows). Its
// Batch.Rows are the rows Decode would give for the same input; bad lines,
// errors and line numbers are Decode's.
func DecodeColumns(r io.Reader, opts DecodeOptions, emit func(*colbatch.Batch) error) (Decoded, error) {
	cd := decoderPool.Get().(*colDecoder)
	defer putDecoder(cd)
	cb := cd.b
	switch opts.Format {
	case NDJSON, 0, JSONArray:
	default:
		// The other formats make maps as they do for Decode. They fill
		// the batch without the key order, which may then name columns
		// the batch dropped: the next input starts without it.
		cd.order = cd.order[:0]
		return Decode(r, opts, func(rows []Row, lines []int) error {
			cb.Reset()
			for i, row := range rows {
				r := cb.AddRow(lines[i])
				for k, v := range row {
					cb.Set(cb.ColumnOf(k), r, v)
				}
			}
			return emit(cb)
		})
	}
	var d Decoded
	if opts.MaxLine <= 0 {
		opts.MaxLine = 16 << 20
	}
	cd.strings = opts.Strings
	take := func(b []byte, line int) (bad, err error) {
		if bad := cd.decode(b, line); bad != nil {
			return bad, nil
		}
		d.Rows++
		if opts.BatchRows > 0 && cb.Len >= opts.BatchRows {
			err := emit(cb)
			cd.reset()
			return nil, err
		}
		return nil, nil
	}
	onBad := func(e *LineError) error {
		d.bad(e)
		if opts.Policy != Reject && opts.BadLine != nil {
			opts.BadLine(e)
		}
		if opts.Policy == Reject {
			return fmt.Errorf("%w: %w", ErrBadInput, e)
		}
		return nil
	}
	var err error
	if opts.Format == JSONArray {
		err = decodeJSONArray(r, opts.MaxLine, take, onBad)
	} else {
		err = decodeNDJSON(r, opts.MaxLine, take, onBad)
	}
	if err != nil {
		return d, err
	}
	if cb.Len > 0 {
		return d, emit(cb)
	}
	return d, nil
}

// decoderPool reuses decoders and the cells of their batches across
// inputs (and their key order: the rows of the next input mostly have the
// same keys).
var decoderPool = sync.Pool{New: func() any { return &colDecoder{b: new(colbatch.Batch)} }}

// maxPooledCells bounds the cells of a batch kept for reuse (about 32 MB).
const maxPooledCells = 1 << 20

func putDecoder(d *colDecoder) {
	cells := 0
	for _, c := range d.b.Cols {
		cells += cap(c.Cells)
	}
	if cells > maxPooledCells {
		return
	}
	d.reset()
	d.arena = nil // its strings live until the rows are committed
	d.strings = nil
	decoderPool.Put(d)
}

// colDecoder decodes JSON objects into the rows of a colbatch.Batch.
type colDecoder struct {
	b *colbatch.Batch
	// order is the previous row's keys and their columns: rows of one
	// input mostly repeat it, and comparing a key with the one expected at
	// its position is cheaper than hashing it.
	order   []orderedKey
	arena   []byte   // the string values' bytes; never written again once a string points into it
	strings *Strings // the caller's arena instead, when it gave one (DecodeOptions.Strings)
	row     int      // the row being decoded
	// The row's cells are set as its fields are scanned (the others made
	// Absent after): seen[c] is gen when this row has set column c, and
	// set counts them.
	seen []uint64
	gen  uint64
	set  int
}

type orderedKey struct {
	key        string
	col        int
	word, mask uint64 // keyWord(key)
}

// arenaChunk is the size of the string arenas of a batch.
const arenaChunk = 64 << 10

// decode adds the row of b (input line line) to the batch, or returns why
// b is a bad line (the batch then has no row of it).
func (d *colDecoder) decode(b []byte, line int) error {
	d.row = d.b.AddUnsetRow(line)
	d.gen++
	d.set = 0
	s := flatScanner{b: b}
	st := scanField
	for j := 0; ; j++ {
		expect, word, mask := "", uint64(0), uint64(0)
		if j < len(d.order) {
			o := &d.order[j]
			expect, word, mask = o.key, o.word, o.mask
		}
		if st = s.next(expect, word, mask); st != scanField {
			break
		}
		d.field(j, &s)
	}
	if st == scanEnd {
		if d.set < len(d.b.Cols) {
			d.clearUnset()
		}
		return nil
	}
	// The slow path decides (and gives the error), as for rowDecoder.
	d.b.ClearRow(d.row)
	if err := checkUTF8(b, "line"); err != nil {
		d.b.DropLastRow()
		return err
	}
	row, err := compute.DecodeRow(b)
	if err != nil {
		d.b.DropLastRow()
		return err
	}
	for k, v := range row {
		d.b.Set(d.b.ColumnOf(k), d.row, v)
	}
	return nil
}

// reset empties the batch for the next rows.
func (d *colDecoder) reset() {
	d.b.Reset()
	if len(d.b.Cols) == 0 {
		d.order = d.order[:0] // the batch dropped its columns
	}
}

func (d *colDecoder) field(j int, s *flatScanner) {
	var c int
	if s.expected {
		c = d.order[j].col
	} else {
		c = d.b.Column(s.key())
		ok := orderedKey{key: d.b.Cols[c].Name, col: c}
		ok.word, ok.mask = keyWord(ok.key)
		switch {
		case j < len(d.order):
			d.order[j] = ok
		case j == len(d.order) && j < maxOrder:
			d.order = append(d.order, ok)
		}
	}
	if c >= len(d.seen) {
		d.seen = append(d.seen, make([]uint64, c+1-len(d.seen))...)
	}
	if d.seen[c] != d.gen {
		d.seen[c] = d.gen
		d.set++
	}
	cell := colbatch.Cell{Kind: s.kind, I: s.num}
	if s.kind == colbatch.String {
		cell.S = d.str(s.str())
	}
	d.b.Cols[c].Cells[d.row] = cell
}

// clearUnset makes Absent the cells of the row that its fields did not set.
func (d *colDecoder) clearUnset() {
	for c := range d.b.Cols {
		if c >= len(d.seen) || d.seen[c] != d.gen {
			d.b.Cols[c].Cells[d.row] = colbatch.Cell{}
		}
	}
}

// str copies s into the arena.
func (d *colDecoder) str(s []byte) string {
	if len(s) == 0 {
		return ""
	}
	if d.strings != nil {
		return d.strings.add(s)
	}
	if len(s) > cap(d.arena)-len(d.arena) {
		if len(s) > arenaChunk/4 {
			return string(s)
		}
		d.arena = make([]byte, 0, arenaChunk)
	}
	start := len(d.arena)
	d.arena = append(d.arena, s...)
	return unsafe.String(&d.arena[start], len(s))
}

// Strings is an arena for the string values of the rows DecodeColumns
// makes, given by a caller that knows when nothing refers to them any more
// (the rows are committed, and no computed column or filter has seen
// them), so that its memory is reused by the next input: the decoder's own
// arena is new for every input, and was nine tenths of the bytes an HTTP
// ingest allocated. The zero Strings is empty.
type Strings struct {
	chunks [][]byte // each arenaChunk bytes; chunks[:used+1] hold strings
	used   int
	cur    []byte // chunks[used], as far as it is written
}

// maxKeptStrings bounds the chunks a Strings keeps across Reset (1 MiB).
const maxKeptStrings = 16

func (a *Strings) add(s []byte) string {
	if len(s) > cap(a.cur)-len(a.cur) {
		if len(s) > arenaChunk/4 {
			return string(s)
		}
		switch {
		case a.cur == nil && len(a.chunks) > 0:
			a.used = 0
		case a.cur != nil && a.used+1 < len(a.chunks):
			a.used++
		default:
			a.chunks = append(a.chunks, make([]byte, 0, arenaChunk))
			a.used = len(a.chunks) - 1
		}
		a.cur = a.chunks[a.used][:0]
	}
	start := len(a.cur)
	a.cur = append(a.cur, s...)
	return unsafe.String(&a.cur[start], len(s))
}

// Reset makes the memory of every string given out reusable: none of them
// may be used after.
func (a *Strings) Reset() {
	if len(a.chunks) > maxKeptStrings {
		clear(a.chunks[maxKeptStrings:])
		a.chunks = a.chunks[:maxKeptStrings]
	}
	a.used, a.cur = 0, nil
}
