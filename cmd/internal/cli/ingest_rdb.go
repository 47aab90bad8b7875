package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sluicedb/sluice/ingest"
	"github.com/sluicedb/sluice/rdbtool"
	"github.com/sluicedb/sluice/server"
)

// rdbIngestFlags are `sluice ingest`'s flags for RDB snapshots: the
// filters of `sluice rdb`.
type rdbIngestFlags struct {
	dbs        []int
	types      []string
	prefixes   []string
	pattern    string
	keyRegex   string
	minSize    int64
	noChecksum bool
	noProgress bool
	mode       string
	generation int64
	// flags are the command's flags: --batch (registered by ingest.go)
	// is sent only when given, so the table's rdb.batch applies otherwise.
	flags *pflag.FlagSet
}

func (f *rdbIngestFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	f.flags = fs
	fs.IntSliceVar(&f.dbs, "db", nil, "rdb: only these databases (comma-separated)")
	fs.StringSliceVar(&f.types, "type", nil, "rdb: only these types: string, list, set, zset, hash, stream, module")
	fs.StringSliceVar(&f.prefixes, "prefix", nil, "rdb: only keys starting with one of these prefixes")
	fs.StringVar(&f.pattern, "pattern", "", "rdb: only keys matching this Redis glob (as KEYS/SCAN MATCH)")
	fs.StringVar(&f.keyRegex, "key", "", "rdb: only keys matching this regular expression (Go RE2 syntax)")
	fs.Int64Var(&f.minSize, "min-size", 0, "rdb: only keys whose estimated memory is at least this many bytes")
	fs.BoolVar(&f.noChecksum, "no-checksum", false, "rdb: do not verify the snapshot's CRC64")
	fs.BoolVar(&f.noProgress, "no-progress", false, "rdb: no progress bar (it is only drawn when stderr is a terminal)")
	fs.StringVar(&f.mode, "mode", server.RDBAtomic, "rdb: atomic (the snapshot is stored whole once read and its checksum checked, or not at all), stream (each batch is stored as it is read; a failure keeps the batches before it) or state (a keyed table's keys become the snapshot's: upserted as read, the absent ones deleted at its end)")
	fs.Int64Var(&f.generation, "generation", 0, "rdb, --mode state: the snapshot's place in the table's sequence of snapshots (an older one is refused); 0 takes the snapshot's ctime")
}

func (f *rdbIngestFlags) options(batch int) (ingest.RDBOptions, error) {
	if f.flags != nil && !f.flags.Changed("batch") {
		batch = 0 // the table's rdb.batch, else 1000
	}
	o := ingest.RDBOptions{BatchRows: batch, SkipChecksum: f.noChecksum}
	switch f.mode {
	case server.RDBAtomic, "":
	case server.RDBStream:
		o.Stream = true
	case server.RDBState:
		o.State = true
	default:
		return o, fmt.Errorf("--mode %q: want %s, %s or %s", f.mode, server.RDBAtomic, server.RDBStream, server.RDBState)
	}
	switch {
	case f.generation < 0:
		return o, fmt.Errorf("--generation %d: want a positive number", f.generation)
	case f.generation > 0 && !o.State:
		return o, fmt.Errorf("--generation: only with --mode %s", server.RDBState)
	}
	o.Generation = f.generation
	o.Filter = rdbtool.Filter{DBs: f.dbs, Prefixes: f.prefixes, Pattern: f.pattern, Regex: f.keyRegex, MinSize: f.minSize}
	for _, t := range f.types {
		typ, err := rdbtool.ParseType(t)
		if err != nil {
			return o, err
		}
		o.Filter.Types = append(o.Filter.Types, typ)
	}
	return o, nil
}

// ingestRDB opens src, draws a progress bar of the bytes read on a
// terminal, hands the stream to ingest and reports the result. The
// errors of ingest name src already.
func ingestRDB(ctx context.Context, cmd *cobra.Command, src string, noProgress bool, ingest func(io.Reader) (server.RDBResult, error)) error {
	setRDBMemoryLimit()
	rc, err := server.OpenSource(ctx, src)
	if err != nil {
		return err
	}
	defer rc.Close()
	var size int64
	if st, err := os.Stat(src); err == nil && st.Mode().IsRegular() {
		size = st.Size()
	}
	var bar *rdbtool.Progress
	if !noProgress {
		bar = rdbtool.NewProgress(cmd.ErrOrStderr(), "ingest", size)
	}
	res, err := ingest(rdbtool.ProgressReader(rc, bar))
	bar.Finish()
	if err != nil {
		// As for the other formats (ingestFailed): only the error, which
		// says what stayed stored (atomic mode: nothing; stream mode: the
		// rows accepted before it).
		if res.Accepted > 0 {
			return fmt.Errorf("%w (%d rows were accepted and stored before the error, mode %s)", err, res.Accepted, res.Mode)
		}
		if res.Batches > 0 {
			return fmt.Errorf("%w (%d batches read, none stored, mode %s)", err, res.Batches, res.Mode)
		}
		return err
	}
	b, _ := json.Marshal(res)
	fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", src, b)
	return nil
}

// rdbMemoryLimit is the soft memory limit of a `sluice ingest` of an RDB
// snapshot when GOMEMLIMIT is not set. A snapshot's rows are decoded a
// batch (≤ 32 MiB of values) at a time, so the live heap stays far below
// it unless one value is huge; then the copies of that value (its JSON,
// the encoded block, its zstd output, Pebble's batch and memtable) each
// become garbage as the next exists, and the limit has the runtime collect
// and return them at once instead of letting the heap double first (issue
// 19: a 200 MB value peaked at 1.3 GB resident, ~1.0 GB with the limit).
// The live heap may exceed the limit: the runtime then bounds the time GC
// takes (at most about half the CPU), it does not fail.
const rdbMemoryLimit = 512 << 20

// setRDBMemoryLimit sets rdbMemoryLimit unless GOMEMLIMIT says otherwise.
func setRDBMemoryLimit() {
	if _, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		return
	}
	debug.SetMemoryLimit(rdbMemoryLimit)
}
