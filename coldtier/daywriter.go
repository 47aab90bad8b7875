package coldtier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	itable "github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/sluicedb/sluice/table"
)

// A run writes each day partition's Parquet files itself (pqarrow) and
// hands them to the transaction as data files built from their footers
// (itable.DataFileFromMetadata), instead of through iceberg-go's
// WriteRecords. WriteRecords computes every row's partition, copies each
// batch into one batch per partition it found (Arrow Take), sorts each
// batch by the table's sort order and converts it to the file schema: work
// (16 % of a run's CPU) and memory (a copy of every batch, two when
// sorted) that a run does not need, since its batches hold one day
// partition each, sorted by key already (the store's order) and built in
// the file schema. The files are the same Parquet as iceberg-go writes
// (the same writer properties, read from the same table properties), in
// the same partition directory, with the same metrics in their manifest
// entries (TestDayWriterMatchesIcebergGo compares them).
//
// A table whose settings this writer does not reproduce (a Parquet
// property it does not know, another partition spec than the day of the
// event time, a column sluice does not write, format version 3) is written
// through WriteRecords as before (dayPlan returns nil).

// dayWriterOff makes every run write through WriteRecords (tests compare
// the two writers).
var dayWriterOff = false

// dayPlan is what the day writers of a run share.
type dayPlan struct {
	fs         icebergio.WriteFileIO
	fileSchema *iceberg.Schema
	arrow      *arrow.Schema // the batches' schema: the file schema with field ids
	spec       iceberg.PartitionSpec
	part       iceberg.PartitionField
	tableLoc   string
	tableProps iceberg.Properties
	version    int
	writeProps *parquet.WriterProperties
	arrowProps pqarrow.ArrowWriterProperties
	target     int64 // bytes of a file before the next starts
	groupBytes int64 // bytes of a row group before the next starts
	sortCol    int   // the event-time column (the partition's source)
	run        uuid.UUID
}

// knownWriteProps are the table properties that set iceberg-go's Parquet
// writer which the day writer reproduces (writerProperties).
var knownWriteProps = map[string]bool{
	itable.ParquetRowGroupLimitKey:       true,
	itable.ParquetRowGroupSizeBytesKey:   true,
	itable.ParquetPageSizeBytesKey:       true,
	itable.ParquetPageRowLimitKey:        true,
	itable.ParquetDictSizeBytesKey:       true,
	itable.ParquetPageVersionKey:         true,
	itable.ParquetCompressionKey:         true,
	itable.ParquetCompressionLevelKey:    true,
	itable.ParquetBloomFilterMaxBytesKey: true,
	itable.WriteTargetFileSizeBytesKey:   true,
}

// newDayPlan prepares the day writers of a run writing cols into tbl, or
// returns nil when tbl has settings they do not reproduce. byKey: the
// rows come sorted by the table's hashBy column (iceberg-go would sort
// each batch by the table's sort order, which is that column: nothing to
// do then; a run in hash order into a sorted table goes through
// iceberg-go).
func newDayPlan(ctx context.Context, tbl *itable.Table, cols []table.Column, sortBy, hashBy string, byKey bool) (*dayPlan, error) {
	if dayWriterOff {
		return nil, nil
	}
	if order := tbl.SortOrder(); !order.IsUnsorted() {
		if !byKey || order.Len() != 1 {
			return nil, nil
		}
		f := order.Field(0)
		src, ok := tbl.Schema().FindFieldByID(f.SourceID())
		if _, identity := f.Transform.(iceberg.IdentityTransform); !ok || src.Name != hashBy || !identity ||
			f.Direction != itable.SortASC || f.NullOrder != itable.NullsFirst {
			return nil, nil
		}
	}
	props := tbl.Properties()
	for k := range props {
		if (strings.HasPrefix(k, "write.parquet.") || strings.HasPrefix(k, "parquet.")) && !knownWriteProps[k] {
			return nil, nil
		}
	}
	if v := props.Get(itable.WriteFormatDefaultKey, "parquet"); !strings.EqualFold(v, "parquet") {
		return nil, nil
	}
	if tbl.Metadata().Version() >= 3 {
		return nil, nil // AddDataFiles wants first row ids the writer would have to assign
	}
	fileSchema, err := iceberg.SanitizeColumnNames(tbl.Schema())
	if err != nil {
		return nil, err
	}
	if !fileSchema.Equals(tbl.Schema()) {
		return nil, nil
	}
	spec := tbl.Spec()
	if spec.NumFields() != 1 {
		return nil, nil
	}
	part := spec.Field(0)
	if _, ok := part.Transform.(iceberg.DayTransform); !ok {
		return nil, nil
	}
	src, ok := fileSchema.FindFieldByID(part.SourceID())
	if !ok || src.Name != sortBy {
		return nil, nil
	}
	sc, err := itable.SchemaToArrowSchemaWithOptions(fileSchema, itable.ArrowSchemaOptions{IncludeFieldIDs: true, TableProperties: props})
	if err != nil {
		return nil, err
	}
	// The batches are built in the file schema: the same columns in the
	// same order with the Arrow types the rows are appended as.
	if sc.NumFields() != len(cols) {
		return nil, nil
	}
	sortCol := -1
	for i, c := range cols {
		f := sc.Field(i)
		if f.Name != c.Name || !arrow.TypeEqual(f.Type, arrowType(c.Type)) || !f.Nullable {
			return nil, nil
		}
		if c.Name == sortBy && c.Type == table.Timestamp {
			sortCol = i
		}
	}
	if sortCol < 0 {
		return nil, nil
	}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	wfs, ok := fsys.(icebergio.WriteFileIO)
	if !ok {
		return nil, nil
	}
	wp, err := writerProperties(props, sc)
	if err != nil {
		return nil, err
	}
	return &dayPlan{
		fs: wfs, fileSchema: fileSchema, arrow: sc, spec: spec, part: part,
		tableLoc: tbl.Location(), tableProps: props, version: tbl.Metadata().Version(),
		writeProps: wp, arrowProps: pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()),
		target:     int64(props.GetInt(itable.WriteTargetFileSizeBytesKey, itable.WriteTargetFileSizeBytesDefault)),
		groupBytes: int64(props.GetInt(itable.ParquetRowGroupSizeBytesKey, itable.ParquetRowGroupSizeBytesDefault)),
		sortCol:    sortCol, run: uuid.New(),
	}, nil
}

// writerProperties are the Parquet writer settings iceberg-go derives
// from the table properties (those in knownWriteProps), with its
// cost-based dictionary fallback on every column (a column of distinct
// values is written plain rather than with a dictionary as large as it).
func writerProperties(props iceberg.Properties, sc *arrow.Schema) (*parquet.WriterProperties, error) {
	version := parquet.DataPageV2
	if props.Get(itable.ParquetPageVersionKey, itable.ParquetPageVersionDefault) == "1" {
		version = parquet.DataPageV1
	}
	var codec compress.Compression
	switch c := props.Get(itable.ParquetCompressionKey, itable.ParquetCompressionDefault); c {
	case "zstd":
		codec = compress.Codecs.Zstd
	case "snappy":
		codec = compress.Codecs.Snappy
	case "uncompressed":
		codec = compress.Codecs.Uncompressed
	case "gzip":
		codec = compress.Codecs.Gzip
	default:
		return nil, fmt.Errorf("compression codec %q: %w", c, errUnsupportedWriteProps)
	}
	wp := []parquet.WriterProperty{
		parquet.WithMaxRowGroupLength(int64(props.GetInt(itable.ParquetRowGroupLimitKey, itable.ParquetRowGroupLimitDefault))),
		parquet.WithDataPageSize(int64(props.GetInt(itable.ParquetPageSizeBytesKey, itable.ParquetPageSizeBytesDefault))),
		parquet.WithDataPageVersion(version),
		parquet.WithBatchSize(int64(props.GetInt(itable.ParquetPageRowLimitKey, itable.ParquetPageRowLimitDefault))),
		parquet.WithDictionaryPageSizeLimit(int64(props.GetInt(itable.ParquetDictSizeBytesKey, itable.ParquetDictSizeBytesDefault))),
		parquet.WithCompression(codec),
		parquet.WithCompressionLevel(props.GetInt(itable.ParquetCompressionLevelKey, itable.ParquetCompressionLevelDefault)),
		parquet.WithMaxBloomFilterBytes(int64(props.GetInt(itable.ParquetBloomFilterMaxBytesKey, itable.ParquetBloomFilterMaxBytesDefault))),
		parquet.WithDictionaryDefault(true),
		// A decimal of up to 9 digits as INT32, up to 18 as INT64 (sluice's
		// are all up to 18): Iceberg's spec allows both, every engine reads
		// them, and the cold read takes them as the unscaled int64 the
		// store holds.
		parquet.WithStoreDecimalAsInteger(true),
	}
	for _, f := range sc.Fields() {
		wp = append(wp, parquet.WithDictionaryCostFallbackFor(f.Name, true))
	}
	return parquet.NewWriterProperties(wp...), nil
}

var errUnsupportedWriteProps = errors.New("not supported by the day writer")

// partValue is one partition value as an iceberg.StructLike.
type partValue []any

func (p partValue) Size() int          { return len(p) }
func (p partValue) Get(i int) any      { return p[i] }
func (p partValue) Set(i int, val any) { p[i] = val }

// dayWriter writes the batches of one day partition into files of at
// most the target size, in order.
type dayWriter struct {
	plan  *dayPlan
	day   int32 // days since 1970-01-01 (the partition value)
	value map[int]any
	path  string // the partition's data directory
	index int    // the day's index in the run (in the file names)
	files int

	w       *pqarrow.FileWriter
	out     icebergio.FileWriter
	counter countingWriter
	name    string
}

func (p *dayPlan) newDayWriter(day int32, index int) (*dayWriter, error) {
	lit := p.part.Transform.Apply(iceberg.Optional[iceberg.Literal]{Valid: true, Val: iceberg.NewLiteral(iceberg.Timestamp(int64(day) * 86400e6))})
	if !lit.Valid {
		return nil, fmt.Errorf("day %d: no partition value", day)
	}
	v := lit.Val.Any()
	dir := strings.TrimSuffix(p.tableLoc, "/") + "/data/" + p.spec.PartitionToPath(partValue{v}, p.fileSchema)
	return &dayWriter{plan: p, day: day, value: map[int]any{p.part.FieldID: v}, path: dir, index: index}, nil
}

// write writes one batch (of this day's rows, in the plan's schema),
// starting a file first when none is open and closing it when it reached
// the target size (its data file appended to files).
func (d *dayWriter) write(rec arrow.RecordBatch, files []iceberg.DataFile) ([]iceberg.DataFile, error) {
	if err := d.checkDay(rec); err != nil {
		return files, err
	}
	if d.w == nil {
		if err := d.open(); err != nil {
			return files, err
		}
	}
	// A new row group when the buffered one passed its byte target (the
	// row limit is pqarrow's own).
	if rec.NumRows() > 0 && d.w.RowGroupTotalBytesWritten() >= d.plan.groupBytes {
		if err := d.w.NewBufferedRowGroupChecked(); err != nil {
			return files, err
		}
	}
	if err := d.w.WriteBuffered(rec); err != nil {
		return files, err
	}
	if d.counter.n >= d.plan.target {
		return d.close(files)
	}
	return files, nil
}

// checkDay refuses a batch with an event time outside the day (the
// file's partition value would be wrong).
func (d *dayWriter) checkDay(rec arrow.RecordBatch) error {
	col, ok := rec.Column(d.plan.sortCol).(*array.Timestamp)
	if !ok {
		return fmt.Errorf("column %q is %s, not a timestamp", rec.ColumnName(d.plan.sortCol), rec.Column(d.plan.sortCol).DataType())
	}
	lo, hi := int64(d.day)*86400e6, int64(d.day+1)*86400e6
	for i, v := range col.TimestampValues() {
		if (int64(v) < lo || int64(v) >= hi) && col.IsValid(i) {
			return fmt.Errorf("column %q: %d µs is outside the day partition %d", rec.ColumnName(d.plan.sortCol), v, d.day)
		}
	}
	return nil
}

func (d *dayWriter) open() error {
	d.files++
	d.name = fmt.Sprintf("%s/%05d-0-%s-%05d.parquet", d.path, d.index, d.plan.run, d.files)
	out, err := d.plan.fs.Create(d.name)
	if err != nil {
		return fmt.Errorf("create %s: %w", d.name, err)
	}
	d.out, d.counter = out, countingWriter{w: out}
	d.w, err = pqarrow.NewFileWriter(d.plan.arrow, &d.counter, d.plan.writeProps, d.plan.arrowProps)
	if err != nil {
		out.Close()
		return err
	}
	return nil
}

// close finishes the open file (if any) and appends its data file.
func (d *dayWriter) close(files []iceberg.DataFile) ([]iceberg.DataFile, error) {
	if d.w == nil {
		return files, nil
	}
	w, out := d.w, d.out
	d.w, d.out = nil, nil
	if err := w.Close(); err != nil {
		out.Close()
		return files, fmt.Errorf("write %s: %w", d.name, err)
	}
	if err := out.Close(); err != nil {
		return files, fmt.Errorf("upload %s: %w", d.name, err)
	}
	meta, err := w.FileMetadata()
	if err != nil {
		return files, err
	}
	df, err := itable.DataFileFromMetadata(itable.DataFileArgs{
		Schema: d.plan.fileSchema, Spec: d.plan.spec, Format: iceberg.ParquetFile, Metadata: meta,
		FilePath: d.name, FileSize: d.counter.n, Content: iceberg.EntryContentData,
		PartitionValues: d.value, Properties: d.plan.tableProps, FormatVersion: d.plan.version,
	})
	if err != nil {
		return files, fmt.Errorf("data file %s: %w", d.name, err)
	}
	return append(files, df), nil
}

// abort drops the open file after an error, as iceberg-go's writer does:
// closes the upload and removes the object (one that stays is an orphan
// for DeleteOrphanFiles). The Parquet writer is left to the GC: its footer
// is not wanted.
func (d *dayWriter) abort() {
	if d.w != nil {
		d.out.Close()
		d.plan.fs.Remove(d.name)
		d.w, d.out = nil, nil
	}
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// dayIndex is the day (days since 1970-01-01, UTC) of unix ns.
func dayIndex(ns int64) int32 {
	return int32(floorNs(ns, int64(86400e9)) / 86400e9)
}
