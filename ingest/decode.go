// Package ingest turns request bodies and files into rows for a table:
// decoding NDJSON, JSON arrays and CSV with a header (gzip or not) with
// line-numbered errors and a skip-or-reject policy, conforming values to a
// table's static schema, applying the table's computed columns and filters
// (package compute), and bounding the batches in flight so that a busy
// server pushes back instead of growing without bound. A Redis RDB snapshot
// becomes one row per key, read as it arrives (DecodeRDB, rdb.go).
package ingest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/sluicedb/sluice/compute"
)

// Row is one decoded row, as compute.DecodeRow makes it.
type Row = map[string]any

// Format is an input format.
type Format uint8

// The input formats.
const (
	NDJSON    Format = iota + 1 // one JSON object per line
	JSONArray                   // one JSON array of objects
	CSV                         // comma-separated values, first line is the header
	Parquet                     // a Parquet file of flat columns
	RDB                         // a Redis RDB snapshot, one row per key (DecodeRDB)
)

func (f Format) String() string {
	switch f {
	case NDJSON:
		return "ndjson"
	case JSONArray:
		return "json"
	case CSV:
		return "csv"
	case Parquet:
		return "parquet"
	case RDB:
		return "rdb"
	}
	return fmt.Sprintf("Format(%d)", uint8(f))
}

// ErrUnsupportedFormat is wrapped by FormatOf errors.
var ErrUnsupportedFormat = errors.New("unsupported format")

// FormatOf picks the format from a Content-Type: application/x-ndjson,
// application/jsonl (and friends) are NDJSON, application/json is a JSON
// array (or NDJSON when the body does not start with '['), text/csv is CSV.
// An empty type is NDJSON.
func FormatOf(contentType string) (Format, error) {
	if contentType == "" {
		return NDJSON, nil
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return 0, fmt.Errorf("%w: content type %q: %v", ErrUnsupportedFormat, contentType, err)
	}
	switch mt {
	case "application/x-ndjson", "application/ndjson", "application/jsonl", "application/x-jsonlines", "application/jsonlines", "text/plain":
		return NDJSON, nil
	case "application/json":
		return JSONArray, nil
	case "text/csv", "application/csv":
		return CSV, nil
	case "application/vnd.apache.parquet", "application/x-parquet", "application/parquet":
		return Parquet, nil
	case RDBContentType:
		return RDB, nil
	case "application/x-www-form-urlencoded":
		// curl -d's default. Not taken as NDJSON: -d @file also strips the
		// file's newlines, which would turn every line into one bad line.
		return 0, fmt.Errorf("%w: content type %q is curl -d's default, and -d strips newlines: send the file with "+
			"curl --data-binary @events.jsonl -H 'Content-Type: application/x-ndjson' (or text/csv, application/json, "+
			"application/vnd.apache.parquet, application/x-redis-rdb)", ErrUnsupportedFormat, mt)
	}
	return 0, fmt.Errorf("%w: content type %q (want %s)", ErrUnsupportedFormat, mt, supportedTypes)
}

// supportedTypes lists the content types FormatOf takes, for its error.
const supportedTypes = "application/x-ndjson (also application/jsonl, text/plain or none), application/json, " +
	"text/csv, application/vnd.apache.parquet or " + RDBContentType

// FormatOfPath picks the format from a file name (a trailing .gz ignored):
// .csv is CSV, .json a JSON array, .parquet Parquet, .rdb an RDB snapshot,
// anything else NDJSON.
func FormatOfPath(p string) Format {
	p = strings.TrimSuffix(strings.ToLower(path.Base(p)), ".gz")
	switch path.Ext(p) {
	case ".csv":
		return CSV
	case ".json":
		return JSONArray
	case ".parquet":
		return Parquet
	case ".rdb":
		return RDB
	}
	return NDJSON
}

// MaybeGunzip returns a reader of r's content, decompressed when it starts
// with the gzip magic number (whatever Content-Encoding said: sniffing also
// serves files).
func MaybeGunzip(r io.Reader) (io.Reader, error) {
	return maybeGunzip(bufio.NewReaderSize(r, 64<<10))
}

// MaybeGunzipPooled is MaybeGunzip with its read buffer taken from a pool:
// call release once the reader is no longer used (a buffer of 64 KiB per
// request was a quarter of the bytes an HTTP batch of 1000 rows allocated).
func MaybeGunzipPooled(r io.Reader) (zr io.Reader, release func(), err error) {
	br := readerPool.Get().(*bufio.Reader)
	br.Reset(r)
	release = func() {
		br.Reset(nil)
		readerPool.Put(br)
	}
	zr, err = maybeGunzip(br)
	return zr, release, err
}

var readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}

func maybeGunzip(br *bufio.Reader) (io.Reader, error) {
	magic, err := br.Peek(2)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return zr, nil
	}
	return br, nil
}

// Policy is what a malformed line does.
type Policy uint8

// The bad-line policies.
const (
	Reject Policy = iota // the batch is rejected: nothing of it is stored
	Skip                 // the line is reported and skipped
)

// ParsePolicy parses "reject" or "skip".
func ParsePolicy(s string) (Policy, error) {
	switch s {
	case "", "reject":
		return Reject, nil
	case "skip":
		return Skip, nil
	}
	return 0, fmt.Errorf("bad-line policy %q: want reject or skip", s)
}

// LineError is a malformed line (or JSON array element), numbered from 1.
type LineError struct {
	Line int
	Err  error
	// Text is the bad line itself (a JSON array's bad element), for its
	// dead letter; empty for CSV and Parquet, whose rows need their header
	// or file to mean anything.
	Text string
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// ErrBadInput is wrapped by the error Decode returns when the input is
// malformed and the policy rejects it (or it cannot be read past).
var ErrBadInput = errors.New("bad input")

// DecodeOptions configure Decode.
type DecodeOptions struct {
	Format Format
	Policy Policy
	// Schema maps column names to their static types: CSV fields are
	// converted to them; CSV fields of other columns are inferred (int64,
	// float64, bool, else string). JSON values are left as decoded: the
	// table converts them (RFC 3339 strings to timestamps included) and
	// names the row and column of a value that does not fit.
	Schema map[string]compute.Type
	// BatchRows is how many rows go to one emit call (0 = all in one call
	// when the input ends, which is what an HTTP batch wants).
	BatchRows int
	// MaxLine bounds one line (0 = 16 MiB).
	MaxLine int
	// Strings, when set, holds the string values DecodeColumns decodes
	// (see Strings); nil: an arena of the decoder's own.
	Strings *Strings
	// BadLine, when set, is called with every bad line Skip skips (all of
	// them, not only the MaxReported that Decoded keeps): the caller makes
	// them dead letters.
	BadLine func(*LineError)
}

// Decoded counts what Decode read.
type Decoded struct {
	Rows     int
	BadLines []*LineError // at most MaxReported, see BadCount
	BadCount int
}

// MaxReported bounds the bad lines kept for a report.
const MaxReported = 100

func (d *Decoded) bad(e *LineError) {
	d.BadCount++
	if len(d.BadLines) < MaxReported {
		d.BadLines = append(d.BadLines, e)
	}
}

// Decode reads rows from r and passes them, BatchRows at a time, to emit,
// which owns the slices and the rows; lines[i] is the input line of rows[i]
// (the row number, from 1, for Parquet). Under Reject the first bad line stops
// decoding with an error wrapping ErrBadInput and the *LineError; under Skip
// bad lines are counted in Decoded and skipped. An error from emit or from
// reading stops decoding and is returned as is.
func Decode(r io.Reader, opts DecodeOptions, emit func(rows []Row, lines []int) error) (Decoded, error) {
	var d Decoded
	if opts.MaxLine <= 0 {
		opts.MaxLine = 16 << 20
	}
	var batch []Row
	var lines []int
	add := func(row Row, line int) error {
		batch = append(batch, row)
		lines = append(lines, line)
		d.Rows++
		if opts.BatchRows > 0 && len(batch) >= opts.BatchRows {
			b, l := batch, lines
			batch, lines = nil, nil
			return emit(b, l)
		}
		return nil
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
	switch opts.Format {
	case NDJSON, 0:
		err = decodeNDJSON(r, opts.MaxLine, rowTaker(add), onBad)
	case JSONArray:
		err = decodeJSONArray(r, opts.MaxLine, rowTaker(add), onBad)
	case CSV:
		err = decodeCSV(r, opts.Schema, add, onBad)
	case Parquet:
		err = decodeParquet(r, add, onBad)
	case RDB:
		err = fmt.Errorf("%w: an RDB snapshot is read by DecodeRDB, not Decode", ErrUnsupportedFormat)
	default:
		err = fmt.Errorf("%w: %v", ErrUnsupportedFormat, opts.Format)
	}
	if err != nil {
		return d, err
	}
	if len(batch) > 0 {
		return d, emit(batch, lines)
	}
	return d, nil
}

// errReader remembers the first read error other than io.EOF: a Scanner
// hands out the partial line before a read error, which must be reported
// as the read error (a body cut short, a size limit), not as a bad line.
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && e.err == nil {
		e.err = err
	}
	return n, err
}

// lineTaker decodes one JSON object (an NDJSON line, a JSON array
// element) of input line line and keeps it: bad is why the object is a bad
// line, err an error that stops decoding (from emit).
type lineTaker func(b []byte, line int) (bad, err error)

// rowTaker is the lineTaker of Decode: one map per row, given to add.
func rowTaker(add func(Row, int) error) lineTaker {
	var rd rowDecoder
	return func(b []byte, line int) (bad, err error) {
		row, err := rd.decode(b)
		if err != nil {
			return err, nil
		}
		return nil, add(row, line)
	}
}

// linePool holds the scanners' first buffers (64 KiB; a longer line
// grows a buffer of its own).
var linePool = sync.Pool{New: func() any { b := make([]byte, lineBufSize); return &b }}

// Chunked is an input already in memory as consecutive pieces (a request
// body read in chunks). Decode and DecodeColumns read the NDJSON lines of
// such an input in place, copying only a line that straddles two pieces:
// reading it through an io.Reader copied every byte twice more (into a
// bufio.Reader's buffer, then into the line scanner's).
type Chunked interface {
	io.Reader
	// NextChunk returns the next piece, or nil at the end. The piece
	// returned before is not used once NextChunk is called again.
	NextChunk() []byte
}

// lineBufSize is the size of the line scanners' first buffers.
const lineBufSize = 64 << 10

func decodeNDJSON(r io.Reader, maxLine int, take lineTaker, onBad func(*LineError) error) error {
	if c, ok := r.(Chunked); ok {
		return decodeNDJSONChunks(c, maxLine, take, onBad)
	}
	er := &errReader{r: r}
	sc := bufio.NewScanner(er)
	buf := linePool.Get().(*[]byte)
	defer linePool.Put(buf) // the scanner is not used after this returns
	sc.Buffer((*buf)[:0], maxLine)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		bad, err := take(b, line)
		if bad != nil {
			if er.err != nil {
				return er.err
			}
			if err := onBad(&LineError{Line: line, Err: bad, Text: string(b)}); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("%w: %w", ErrBadInput, &LineError{Line: line + 1, Err: fmt.Errorf("line longer than %d bytes", maxLine)})
		}
		return err
	}
	return nil
}

// decodeNDJSONChunks is decodeNDJSON over the pieces of src, each line
// taken where it lies in its piece; a line that straddles pieces is joined
// in a buffer of its own. Lines, bad lines and errors are decodeNDJSON's,
// the "line longer than" one included: a bufio.Scanner fails on a line of
// at least max(maxLine, its first buffer's size) bytes, '\r' included and
// '\n' not, whether or not the line ends with a newline.
func decodeNDJSONChunks(src Chunked, maxLine int, take lineTaker, onBad func(*LineError) error) error {
	limit := max(maxLine, lineBufSize)
	buf := linePool.Get().(*[]byte)
	held := (*buf)[:0]      // the start of a line that continues in the next piece
	defer linePool.Put(buf) // held may have grown into a buffer of its own: buf is still the pool's
	line := 0
	tooLong := func() error {
		return fmt.Errorf("%w: %w", ErrBadInput, &LineError{Line: line + 1, Err: fmt.Errorf("line longer than %d bytes", maxLine)})
	}
	one := func(b []byte) error {
		line++
		b = bytes.TrimSpace(b)
		if len(b) == 0 {
			return nil
		}
		bad, err := take(b, line)
		if bad != nil {
			return onBad(&LineError{Line: line, Err: bad, Text: string(b)})
		}
		return err
	}
	for c := src.NextChunk(); c != nil; c = src.NextChunk() {
		if len(held) > 0 {
			i := bytes.IndexByte(c, '\n')
			if i < 0 {
				if len(held)+len(c) >= limit {
					return tooLong()
				}
				held = append(held, c...)
				continue
			}
			if len(held)+i >= limit {
				return tooLong()
			}
			held = append(held, c[:i]...)
			if err := one(held); err != nil {
				return err
			}
			held = held[:0]
			c = c[i+1:]
		}
		for {
			i := bytes.IndexByte(c, '\n')
			if i < 0 {
				break
			}
			if i >= limit {
				return tooLong()
			}
			if err := one(c[:i]); err != nil {
				return err
			}
			c = c[i+1:]
		}
		if len(c) >= limit {
			return tooLong()
		}
		held = append(held, c...)
	}
	if len(held) > 0 {
		return one(held)
	}
	return nil
}

func decodeJSONArray(r io.Reader, maxLine int, take lineTaker, onBad func(*LineError) error) error {
	// The array is streamed (a body held whole and then copied whole was
	// the biggest part of a JSON batch's memory); lines are found from the
	// offsets of the newlines read.
	nl := &newlineReader{r: r}
	br := bufio.NewReaderSize(nl, 64<<10)
	var base int64 // white space before the first value
	for {
		b, err := br.Peek(1)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if !isSpace(b[0]) {
			break
		}
		br.ReadByte()
		base++
	}
	if b, _ := br.Peek(1); b[0] != '[' {
		// application/json with objects one per line: NDJSON.
		return decodeNDJSON(io.MultiReader(strings.NewReader(strings.Repeat("\n", nl.linesBefore(base)-1)), br), maxLine, take, onBad)
	}
	dec := json.NewDecoder(br)
	lineAt := func(off int64) int { return nl.linesBefore(base + off) }
	syntax := func(err error) error {
		if nl.err != nil {
			return nl.err // the body could not be read: not a syntax error
		}
		// The array cannot be read past a syntax error: the whole input is bad.
		off := dec.InputOffset()
		var se *json.SyntaxError
		if errors.As(err, &se) {
			off = se.Offset
		}
		return fmt.Errorf("%w: %w", ErrBadInput, &LineError{Line: lineAt(off), Err: err})
	}
	if _, err := dec.Token(); err != nil {
		return syntax(err)
	}
	for dec.More() {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return syntax(err)
		}
		// The value's first byte (InputOffset is right after it).
		line := lineAt(dec.InputOffset() - int64(len(raw)))
		bad, err := take(raw, line)
		if bad != nil {
			if err := onBad(&LineError{Line: line, Err: bad, Text: string(raw)}); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil {
		return syntax(err)
	}
	if dec.More() {
		return syntax(errors.New("data after the JSON array"))
	}
	return nil
}

// newlineReader records the offsets of the newlines it reads (8 bytes a
// line) and its first read error.
type newlineReader struct {
	r        io.Reader
	off      int64
	newlines []int64
	err      error
}

func (n *newlineReader) Read(p []byte) (int, error) {
	k, err := n.r.Read(p)
	for i, c := range p[:k] {
		if c == '\n' {
			n.newlines = append(n.newlines, n.off+int64(i))
		}
	}
	n.off += int64(k)
	if err != nil && !errors.Is(err, io.EOF) && n.err == nil {
		n.err = err
	}
	return k, err
}

// linesBefore is the line (from 1) of the byte at off.
func (n *newlineReader) linesBefore(off int64) int {
	i, _ := slices.BinarySearch(n.newlines, off)
	return 1 + i
}

func decodeCSV(r io.Reader, schema map[string]compute.Type, add func(Row, int) error, onBad func(*LineError) error) error {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		return fmt.Errorf("%w: %w", ErrBadInput, &LineError{Line: 1, Err: fmt.Errorf("csv header: %w", err)})
	}
	header = append([]string(nil), header...)
	for i, h := range header {
		header[i] = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
		if header[i] == "" {
			return fmt.Errorf("%w: %w", ErrBadInput, &LineError{Line: 1, Err: fmt.Errorf("csv header: column %d has no name", i+1)})
		}
		if err := checkUTF8([]byte(header[i]), "column name"); err != nil {
			return fmt.Errorf("%w: %w", ErrBadInput, &LineError{Line: 1, Err: fmt.Errorf("csv header: column %d: %w", i+1, err)})
		}
	}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			var pe *csv.ParseError
			if !errors.As(err, &pe) {
				// The input's own error (past a size bound, cut short):
				// not a bad line, and the reader returns it again at
				// every read, so skipping it would never end.
				return err
			}
			if err := onBad(&LineError{Line: pe.StartLine, Err: pe.Err}); err != nil {
				return err
			}
			continue
		}
		line, _ := cr.FieldPos(0)
		row := make(Row, len(header))
		var bad error
		for i, field := range rec {
			if field == "" {
				continue // an empty field is null
			}
			if !utf8.ValidString(field) {
				bad = fmt.Errorf("column %q: %w", header[i], checkUTF8([]byte(field), "field"))
				break
			}
			v, err := csvValue(field, schema, header[i])
			if err != nil {
				bad = fmt.Errorf("column %q: %w", header[i], err)
				break
			}
			row[header[i]] = v
		}
		if bad != nil {
			if err := onBad(&LineError{Line: line, Err: bad}); err != nil {
				return err
			}
			continue
		}
		if err := add(row, line); err != nil {
			return err
		}
	}
}

// csvValue converts a CSV field to its column's type, or infers one.
func csvValue(s string, schema map[string]compute.Type, col string) (any, error) {
	t, ok := schema[col]
	if !ok {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return f, nil
		}
		switch s {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return s, nil
	}
	switch t {
	case compute.String:
		return s, nil
	case compute.JSON:
		return compute.Coerce(s, t)
	case compute.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not a bool", s)
		}
		return b, nil
	case compute.Timestamp:
		return parseTime(s)
	}
	var n any
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		n = i
	} else if f, err := strconv.ParseFloat(s, 64); err == nil {
		n = f
	} else {
		return nil, fmt.Errorf("%q is not a number", s)
	}
	return compute.Coerce(n, t)
}
