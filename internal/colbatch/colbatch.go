// Package colbatch holds decoded rows by column: what the JSON decoders of
// package ingest fill and package table converts to its typed columns,
// without a map and boxed values per row. It is the one type both packages
// share (ingest may not import table, nor table ingest). A Batch is the
// same rows as the []map[string]any the decoders return otherwise (Rows
// makes them), held as one typed cell per (column, row).
package colbatch

import "math"

// Kind is what a Cell holds.
type Kind uint8

// The kinds of cells.
const (
	Absent Kind = iota // the row has no such key
	Null               // JSON null (the key is present)
	Int                // int64 in I
	Float              // float64, its IEEE 754 bits in I
	Bool               // I is 0 or 1
	String             // S
	Value              // any other value (nested JSON, a number beyond int64) in Batch.Values[I]
)

// Cell is one value of one row. The zero Cell is Absent.
type Cell struct {
	S    string
	I    int64
	Kind Kind
}

// Float returns the float64 of a Float cell.
func (c Cell) Float() float64 { return math.Float64frombits(uint64(c.I)) }

// Column is one key's cells, one per row of its Batch.
type Column struct {
	Name  string
	Cells []Cell
}

// Batch is rows held by column. Every column has a cell per row (Absent
// where the row lacks the key).
type Batch struct {
	// Len is the number of rows.
	Len  int
	Cols []Column
	// Lines[r] is the input line of row r.
	Lines []int
	// Values holds the values of Value cells.
	Values []any
	index  map[string]int
}

// maxKeptColumns bounds the columns Reset keeps for the next rows: inputs
// with ever-new keys start from no columns again.
const maxKeptColumns = 256

// Reset empties b for new rows, keeping its memory (and its columns, which
// later rows mostly repeat).
func (b *Batch) Reset() {
	if len(b.Cols) > maxKeptColumns {
		clear(b.Cols)
		b.Cols = b.Cols[:0]
		clear(b.index)
	}
	for i := range b.Cols {
		c := &b.Cols[i]
		clear(c.Cells) // drop the references to the strings of earlier rows
		c.Cells = c.Cells[:0]
	}
	b.Len = 0
	b.Lines = b.Lines[:0]
	clear(b.Values)
	b.Values = b.Values[:0]
}

// Column returns the index of the column named name, adding it (all
// Absent for the rows so far) when b lacks it. name is copied only when
// the column is new.
func (b *Batch) Column(name []byte) int {
	if i, ok := b.index[string(name)]; ok {
		return i
	}
	return b.addColumn(string(name))
}

// ColumnOf is Column for a string.
func (b *Batch) ColumnOf(name string) int {
	if i, ok := b.index[name]; ok {
		return i
	}
	return b.addColumn(name)
}

func (b *Batch) addColumn(name string) int {
	if b.index == nil {
		b.index = map[string]int{}
	}
	i := len(b.Cols)
	if i < cap(b.Cols) {
		b.Cols = b.Cols[:i+1]
		b.Cols[i].Name = name
		b.Cols[i].Cells = append(b.Cols[i].Cells[:0], make([]Cell, b.Len)...)
	} else {
		b.Cols = append(b.Cols, Column{Name: name, Cells: make([]Cell, b.Len, max(b.Len, 1024))})
	}
	b.index[name] = i
	return i
}

// Find returns the index of the column named name, or -1.
func (b *Batch) Find(name string) int {
	if i, ok := b.index[name]; ok {
		return i
	}
	return -1
}

// AddRow appends a row of Absent cells from input line line and returns
// its index.
func (b *Batch) AddRow(line int) int {
	for i := range b.Cols {
		b.Cols[i].Cells = append(b.Cols[i].Cells, Cell{})
	}
	b.Lines = append(b.Lines, line)
	b.Len++
	return b.Len - 1
}

// AddUnsetRow is AddRow for a caller that then sets every column's cell
// of the row itself (Absent where the row lacks the key), before anything
// reads the batch: the cells are not written twice (AddRow's Absent cells
// were a tenth of decoding a row). Until set, a cell holds anything.
func (b *Batch) AddUnsetRow(line int) int {
	for i := range b.Cols {
		c := &b.Cols[i]
		if n := len(c.Cells); n < cap(c.Cells) {
			c.Cells = c.Cells[:n+1]
		} else {
			c.Cells = append(c.Cells, Cell{})
		}
	}
	b.Lines = append(b.Lines, line)
	b.Len++
	return b.Len - 1
}

// ClearRow makes every cell of row r Absent.
func (b *Batch) ClearRow(r int) {
	for i := range b.Cols {
		b.Cols[i].Cells[r] = Cell{}
	}
}

// DropLastRow removes the last row.
func (b *Batch) DropLastRow() {
	b.Len--
	for i := range b.Cols {
		c := &b.Cols[i]
		c.Cells[b.Len] = Cell{}
		c.Cells = c.Cells[:b.Len]
	}
	b.Lines = b.Lines[:b.Len]
}

// Set stores v (a value as compute.DecodeRow makes it: int64, float64,
// string, bool, nil, or anything else as a Value) in column c of row r.
func (b *Batch) Set(c, r int, v any) {
	b.Cols[c].Cells[r] = b.CellOf(v)
}

// CellOf is the cell holding v (Set).
func (b *Batch) CellOf(v any) Cell {
	switch x := v.(type) {
	case nil:
		return Cell{Kind: Null}
	case int64:
		return Cell{Kind: Int, I: x}
	case float64:
		return Cell{Kind: Float, I: int64(math.Float64bits(x))}
	case string:
		return Cell{Kind: String, S: x}
	case bool:
		if x {
			return Cell{Kind: Bool, I: 1}
		}
		return Cell{Kind: Bool}
	}
	b.Values = append(b.Values, v)
	return Cell{Kind: Value, I: int64(len(b.Values) - 1)}
}

// Any returns the value of a cell as the map decoders give it (int64,
// float64, bool, string, nil or the Value); ok is false for Absent.
func (b *Batch) Any(c Cell) (v any, ok bool) {
	switch c.Kind {
	case Absent:
		return nil, false
	case Null:
		return nil, true
	case Int:
		return c.I, true
	case Float:
		return c.Float(), true
	case Bool:
		return c.I != 0, true
	case String:
		return c.S, true
	}
	return b.Values[c.I], true
}

// Rows returns the rows as maps, as the map decoders make them: a key for
// every cell that is not Absent.
func (b *Batch) Rows() []map[string]any {
	rows := make([]map[string]any, b.Len)
	for r := range rows {
		n := 0
		for i := range b.Cols {
			if b.Cols[i].Cells[r].Kind != Absent {
				n++
			}
		}
		row := make(map[string]any, n)
		for i := range b.Cols {
			if v, ok := b.Any(b.Cols[i].Cells[r]); ok {
				row[b.Cols[i].Name] = v
			}
		}
		rows[r] = row
	}
	return rows
}
