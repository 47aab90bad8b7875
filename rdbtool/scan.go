package rdbtool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/sluicedb/sluice/rdb"
)

// Filter selects the keys a verb looks at. The zero Filter selects every key.
// DBs, Types, Prefixes and Pattern become the parser's own filter, so the
// values of rejected keys are skipped without being decoded; Regex runs as a
// func filter in the same place (it sees the key only). MinSize needs the
// value: keys passing the other filters are estimated (see Memory) and
// dropped when below it.
type Filter struct {
	DBs      []int      // keep keys of these databases
	Types    []rdb.Type // keep keys of these types
	Prefixes []string   // keep keys starting with any of these
	Pattern  string     // keep keys matching this Redis glob (KEYS/SCAN MATCH syntax)
	Regex    string     // keep keys matching this Go regular expression (RE2)
	MinSize  int64      // keep keys whose estimated memory is at least this many bytes
}

// ParseType maps a type name as Redis's TYPE command prints it ("string",
// "list", "set", "zset", "hash", "stream", "module") to an rdb.Type.
func ParseType(name string) (rdb.Type, error) {
	for t := rdb.String; t <= rdb.Module; t++ {
		if t.String() == strings.ToLower(name) {
			return t, nil
		}
	}
	if strings.EqualFold(name, "sortedset") {
		return rdb.ZSet, nil
	}
	return 0, fmt.Errorf("rdbtool: unknown type %q (want string, list, set, zset, hash, stream or module)", name)
}

// parserFilter turns f into the parser's filter (nil when f selects all).
func (f Filter) parserFilter() (rdb.Filter, error) {
	var fs []rdb.Filter
	if len(f.DBs) > 0 {
		fs = append(fs, rdb.DBs(f.DBs...))
	}
	if len(f.Types) > 0 {
		fs = append(fs, rdb.Types(f.Types...))
	}
	if len(f.Prefixes) > 0 {
		fs = append(fs, rdb.KeyPrefix(f.Prefixes...))
	}
	if f.Pattern != "" {
		pf, err := rdb.KeyPattern(f.Pattern)
		if err != nil {
			return nil, err
		}
		fs = append(fs, pf)
	}
	if f.Regex != "" {
		re, err := regexp.Compile(f.Regex)
		if err != nil {
			return nil, fmt.Errorf("rdbtool: key regex: %w", err)
		}
		fs = append(fs, func(e *rdb.Entry) bool { return re.Match(e.Key) })
	}
	switch len(fs) {
	case 0:
		return nil, nil
	case 1:
		return fs[0], nil
	}
	return rdb.All(fs...), nil
}

// Options are the settings every verb shares.
type Options struct {
	Filter Filter
	// Progress, if a terminal, gets a progress bar while the file is read.
	Progress io.Writer
	// SkipChecksum turns off the parser's CRC64 check.
	SkipChecksum bool
	// NoMmap reads the file through a buffer instead of mapping it.
	NoMmap bool
	// NoParallel keeps Export on one goroutine. By default, with two or
	// more CPUs and no MinSize, parsing and JSON writing run on two.
	NoParallel bool
	// StageCPU, when not nil (set by `sluice bench rdb` only), makes the
	// parallel export pin each of its two goroutines to an OS thread and
	// record the CPU time of that thread: [0] the parsing side, [1] the
	// writer. With two idle cores the export could not run faster than the
	// larger of the two.
	StageCPU *[2]time.Duration
}

// input is an open RDB file being scanned by one verb.
type input struct {
	path     string
	p        *rdb.Parser
	size     int64
	progress *Progress
	minSize  int64
	// estimateAll estimates every key's memory as its value is written
	// (KeyReader), not only under a MinSize.
	estimateAll bool
	est         keyEstimate
	// estimateFn is in.estimateElement bound once: a method value passed
	// to Visit directly would allocate a closure per key.
	estimateFn func(*rdb.Element) error
}

func openInput(path, label string, opts Options) (*input, error) {
	filter, err := opts.Filter.parserFilter()
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("rdbtool: %w", err)
	}
	in := &input{path: path, size: st.Size(), minSize: opts.Filter.MinSize}
	in.estimateFn = in.estimateElement
	// rdb.Open maps the file (zero-copy; the parser releases pages behind
	// it, so RSS stays bounded) unless NoMmap; then it reads through a
	// 1 MiB window.
	in.p, err = rdb.Open(path, &rdb.Options{Filter: filter, SkipChecksum: opts.SkipChecksum, BufferSize: 1 << 20, NoMmap: opts.NoMmap})
	if err != nil {
		return nil, fmt.Errorf("rdbtool: %w", err)
	}
	if opts.Progress != nil {
		in.progress = NewProgress(opts.Progress, label, in.size)
	}
	return in, nil
}

// next advances to the next selected key, checking ctx every 4096 keys.
func (in *input) next(ctx context.Context, n *int) bool {
	if !in.p.Next() {
		return false
	}
	*n++
	if *n&4095 == 0 {
		in.progress.Set(in.p.Entry().Offset)
		if ctx.Err() != nil {
			return false
		}
	}
	return true
}

// finish returns the parse error (with the file name; the parser's
// *CorruptionError carries offset and key) or ctx's error.
func (in *input) finish(ctx context.Context, err error) error {
	in.progress.Finish()
	if err == nil {
		err = in.p.Err()
	}
	if cerr := in.p.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("rdbtool: %w", cerr)
	}
	if err == nil {
		err = ctx.Err()
	}
	var ce *rdb.CorruptionError
	if err != nil && !errors.As(err, &ce) {
		// A CorruptionError from rdb.Open names the file already.
		return fmt.Errorf("%s: %w", in.path, err)
	}
	return err
}

// estimating reports whether values are estimated as they are written.
func (in *input) estimating() bool { return in.minSize > 0 || in.estimateAll }

// memKindOf maps a logical type to the estimator's.
func memKindOf(t rdb.Type) memKind {
	switch t {
	case rdb.String:
		return memString
	case rdb.List:
		return memList
	case rdb.Set:
		return memSet
	case rdb.ZSet:
		return memZSet
	case rdb.Hash:
		return memHash
	case rdb.Stream:
		return memStream
	}
	return memModule
}

// estimate visits the current key's value and leaves its estimate in in.est.
// bigEnough reports whether e passes Filter.MinSize (always, without
// decoding, when there is none); with a MinSize it estimates e's memory,
// which reads its value.
func (in *input) bigEnough(e *rdb.Entry) (bool, error) {
	if in.minSize <= 0 {
		return true, nil
	}
	if err := in.estimate(e); err != nil {
		return false, err
	}
	size, _ := in.est.finish()
	return size >= in.minSize, nil
}

func (in *input) estimate(e *rdb.Entry) error {
	in.est.start(memKindOf(e.Type), e.Key, e.ExpireAt != 0)
	if e.Type == rdb.String {
		v, err := in.p.Value()
		if err != nil {
			return err
		}
		in.est.stringValue(v)
		return nil
	}
	return in.p.Visit(in.estimateFn)
}

func (in *input) estimateElement(el *rdb.Element) error {
	est := &in.est
	switch el.Kind {
	case rdb.ListItem, rdb.SetMember:
		est.member(el.Member)
	case rdb.ZSetMember:
		est.zsetMember(el.Member, el.Score)
	case rdb.HashField:
		est.hashField(el.Member, el.Value)
	case rdb.StreamEntry:
		est.streamEntry(el.Fields)
	case rdb.StreamGroup, rdb.StreamConsumer, rdb.StreamPending, rdb.StreamConsumerPending:
		est.streamExtra(el.Member)
	case rdb.ModuleItem:
		est.value += int64(len(el.Member)) + 8
	}
	return nil
}
