package cli

import (
	"context"
	"io"
	"os"
	"os/signal"

	"github.com/spf13/cobra"

	"github.com/sluicedb/sluice/rdbtool"
)

// rdbFlags are the flags every `sluice rdb` verb shares.
type rdbFlags struct {
	dbs        []int
	types      []string
	prefixes   []string
	pattern    string
	keyRegex   string
	minSize    int64
	noChecksum bool
	noMmap     bool
	noParallel bool
	noProgress bool
	output     string
	script     string
}

var rdbOpts rdbFlags

var rdbCmd = &cobra.Command{
	Use:   "rdb",
	Short: "Read a Redis/Valkey RDB snapshot: export JSON, memory report, keys, counts",
	Long: `Read a Redis or Valkey RDB snapshot file.

Every verb takes the same filters: --db, --type, --prefix, --pattern (Redis glob),
--key (regular expression) and --min-size (estimated memory, bytes). DB, type,
prefix, pattern and regex are checked on the key before its value is read, so
rejected values are skipped without being decoded. The JSON form is documented
in docs/rdb.md. A corrupt or truncated file fails with a non-zero exit status
and a message naming the byte offset and the key.`,
}

func rdbOptions(cmd *cobra.Command) (rdbtool.Options, error) {
	o := rdbtool.Options{SkipChecksum: rdbOpts.noChecksum, NoMmap: rdbOpts.noMmap, NoParallel: rdbOpts.noParallel}
	o.Filter = rdbtool.Filter{
		DBs: rdbOpts.dbs, Prefixes: rdbOpts.prefixes, Pattern: rdbOpts.pattern,
		Regex: rdbOpts.keyRegex, MinSize: rdbOpts.minSize,
	}
	for _, t := range rdbOpts.types {
		typ, err := rdbtool.ParseType(t)
		if err != nil {
			return o, err
		}
		o.Filter.Types = append(o.Filter.Types, typ)
	}
	if !rdbOpts.noProgress {
		o.Progress = cmd.ErrOrStderr()
	}
	return o, nil
}

// rdbOutput opens -o (default: the command's stdout).
func rdbOutput(cmd *cobra.Command) (io.Writer, func() error, error) {
	if rdbOpts.output == "" || rdbOpts.output == "-" {
		return cmd.OutOrStdout(), func() error { return nil }, nil
	}
	f, err := os.Create(rdbOpts.output)
	if err != nil {
		return nil, nil, err
	}
	return f, f.Close, nil
}

// rdbVerb wraps a verb: signal-aware context, options, output file.
func rdbVerb(run func(ctx context.Context, path string, w io.Writer, o rdbtool.Options) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
		defer stop()
		o, err := rdbOptions(cmd)
		if err != nil {
			return err
		}
		w, closeOut, err := rdbOutput(cmd)
		if err != nil {
			return err
		}
		err = run(ctx, args[0], w, o)
		if cerr := closeOut(); err == nil {
			err = cerr
		}
		return err
	}
}

func exportVerb(format rdbtool.Format) func(context.Context, string, io.Writer, rdbtool.Options) error {
	return func(ctx context.Context, path string, w io.Writer, o rdbtool.Options) error {
		if rdbOpts.script != "" {
			_, err := rdbtool.ExportScript(ctx, path, w, format, rdbOpts.script, o)
			return err
		}
		_, err := rdbtool.Export(ctx, path, w, format, o)
		return err
	}
}

func init() {
	f := rdbCmd.PersistentFlags()
	f.IntSliceVar(&rdbOpts.dbs, "db", nil, "only these databases (repeatable, comma-separated)")
	f.StringSliceVar(&rdbOpts.types, "type", nil, "only these types: string, list, set, zset, hash, stream, module")
	f.StringSliceVar(&rdbOpts.prefixes, "prefix", nil, "only keys starting with one of these prefixes")
	f.StringVar(&rdbOpts.pattern, "pattern", "", "only keys matching this Redis glob (as KEYS/SCAN MATCH)")
	f.StringVar(&rdbOpts.keyRegex, "key", "", "only keys matching this regular expression (Go RE2 syntax)")
	f.Int64Var(&rdbOpts.minSize, "min-size", 0, "only keys whose estimated memory is at least this many bytes (decodes values)")
	f.BoolVar(&rdbOpts.noChecksum, "no-checksum", false, "do not verify the file's CRC64")
	f.BoolVar(&rdbOpts.noMmap, "no-mmap", false, "read the file through a buffer instead of memory-mapping it")
	f.BoolVar(&rdbOpts.noProgress, "no-progress", false, "no progress bar (it is only drawn when stderr is a terminal)")
	f.StringVarP(&rdbOpts.output, "output", "o", "", "write to this file instead of stdout")

	jsonCmd := &cobra.Command{
		Use:   "json FILE",
		Short: "Export the selected keys as one JSON array (one key object per line)",
		Args:  cobra.ExactArgs(1),
		RunE:  rdbVerb(exportVerb(rdbtool.JSON)),
	}
	jsonlCmd := &cobra.Command{
		Use:   "jsonl FILE",
		Short: "Export the selected keys as JSON Lines (one key object per line); with --script, the script's rows",
		Args:  cobra.ExactArgs(1),
		RunE:  rdbVerb(exportVerb(rdbtool.JSONLines)),
	}
	for _, c := range []*cobra.Command{jsonCmd, jsonlCmd} {
		c.Flags().BoolVar(&rdbOpts.noParallel, "no-parallel", false, "parse and write JSON on one goroutine (default: two when there are 2+ CPUs)")
		c.Flags().StringVar(&rdbOpts.script, "script", "", "Lua file whose function key(e) keeps, drops or rewrites each key (see docs/rdb.md)")
	}

	memoryCmd := &cobra.Command{
		Use:   "memory FILE",
		Short: "Estimated memory per key, as CSV (database,type,key,size_in_bytes,encoding,num_elements,len_largest_element,expiry)",
		Args:  cobra.ExactArgs(1),
		RunE: rdbVerb(func(ctx context.Context, path string, w io.Writer, o rdbtool.Options) error {
			_, err := rdbtool.Memory(ctx, path, w, o)
			return err
		}),
	}
	var topN int
	topCmd := &cobra.Command{
		Use:   "top FILE",
		Short: "The -n keys with the largest estimated memory, biggest first (memory CSV columns)",
		Args:  cobra.ExactArgs(1),
		RunE: rdbVerb(func(ctx context.Context, path string, w io.Writer, o rdbtool.Options) error {
			recs, _, err := rdbtool.Top(ctx, path, topN, o)
			if err != nil {
				return err
			}
			return rdbtool.WriteMemoryCSV(w, recs)
		}),
	}
	topCmd.Flags().IntVarP(&topN, "n", "n", 10, "number of keys")
	var by rdbtool.GroupBy
	prefixCmd := &cobra.Command{
		Use:   "prefix FILE",
		Short: "Keys and estimated bytes per key prefix (or digit pattern with --by-pattern), largest first, as CSV",
		Args:  cobra.ExactArgs(1),
		RunE: rdbVerb(func(ctx context.Context, path string, w io.Writer, o rdbtool.Options) error {
			groups, _, err := rdbtool.PrefixSummary(ctx, path, by, o)
			if err != nil {
				return err
			}
			return rdbtool.WriteGroupsCSV(w, groups)
		}),
	}
	prefixCmd.Flags().StringVar(&by.Separator, "sep", ":", "key segment separator")
	prefixCmd.Flags().IntVar(&by.Depth, "depth", 1, "leading segments that form the prefix")
	prefixCmd.Flags().BoolVar(&by.Pattern, "by-pattern", false, "group by the key with digit runs replaced by * (user:42:x -> user:*:x)")
	prefixCmd.Flags().IntVar(&by.MaxGroups, "max-groups", 100000, "distinct groups kept; the rest are counted as (other)")
	memoryCmd.AddCommand(topCmd, prefixCmd)

	keysCmd := &cobra.Command{
		Use:   "keys FILE",
		Short: "List the selected keys, one a line (non-text keys Go-quoted)",
		Args:  cobra.ExactArgs(1),
		RunE: rdbVerb(func(ctx context.Context, path string, w io.Writer, o rdbtool.Options) error {
			_, err := rdbtool.Keys(ctx, path, w, o)
			return err
		}),
	}
	countCmd := &cobra.Command{
		Use:   "count FILE",
		Short: "Count the selected keys (and those with an expiry) by database and type",
		Args:  cobra.ExactArgs(1),
		RunE: rdbVerb(func(ctx context.Context, path string, w io.Writer, o rdbtool.Options) error {
			c, _, err := rdbtool.Count(ctx, path, o)
			if err != nil {
				return err
			}
			return c.WriteTable(w)
		}),
	}
	rdbCmd.AddCommand(jsonCmd, jsonlCmd, memoryCmd, keysCmd, countCmd)
	rootCmd.AddCommand(rdbCmd)
}
