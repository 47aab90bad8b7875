// Package rdbcorpus makes the realistic mixed RDB snapshots the RDB
// benchmarks (`sluice bench rdb`, bench/rdbbench) and the rdbtool tests read:
// a real redis-server (internal/redisproc) is filled with a reproducible key
// mix over pipelined RESP and SAVEd. It is fixture tooling, not product code.
package rdbcorpus

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/sluicedb/sluice/internal/redisproc"
)

// Options says what benchmark RDB to make. The zero value makes the
// default corpus (DefaultSizeMB, seed 1) in DefaultCacheDir.
type Options struct {
	// SizeMB is the approximate size of the RDB file to produce; the mix is
	// the same at every size, only the number of keys grows. Default
	// DefaultSizeMB.
	SizeMB int
	// Dir is where finished files are kept and reused. Default DefaultCacheDir().
	Dir string
	// Seed makes the content reproducible. Default 1.
	Seed uint64
	// RedisServer is the redis-server binary. Default "redis-server" in PATH.
	RedisServer string
	// Log receives progress lines; nil discards them.
	Log io.Writer
	// Force regenerates even when a file for these options exists.
	Force bool
}

// DefaultSizeMB is the default benchmark RDB size, the size of the peers'
// published corpus (400 MB mixed RDB by Redis 7.0).
const DefaultSizeMB = 400

// DefaultCacheDir is where benchmark RDBs live: $XDG_CACHE_HOME/sluice/rdb
// (or ~/.cache/sluice/rdb), outside any git tree.
func DefaultCacheDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		d = os.TempDir()
	}
	return filepath.Join(d, "sluice", "rdb")
}

// corpusVersion changes whenever the mix changes, so stale files are not reused.
const corpusVersion = 2

// Path is the file Generate writes (and reuses) for opts.
func Path(opts Options) string {
	opts = opts.withDefaults()
	return filepath.Join(opts.Dir, fmt.Sprintf("mixed-v%d-%dmb-seed%d.rdb", corpusVersion, opts.SizeMB, opts.Seed))
}

func (o Options) withDefaults() Options {
	if o.SizeMB <= 0 {
		o.SizeMB = DefaultSizeMB
	}
	if o.Dir == "" {
		o.Dir = DefaultCacheDir()
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return o
}

// Generate returns the path of a realistic mixed RDB of about opts.SizeMB,
// written by a real redis-server (started on 127.0.0.1 on a free port, filled
// with pipelined RESP, then SAVEd). An existing file for the same options is
// reused. The mix, per database (db 0 ≈ 70% of the bytes, db 1 ≈ 20%, db 3
// ≈ 10%): small text strings, integer strings, large compressible JSON-like
// strings, incompressible binary strings, small lists (listpack) and large
// ones (quicklist of several nodes), intsets, small and large sets, small
// zsets (listpack) and large ones (skiplist), small hashes (listpack) and
// large ones (hashtable), a few streams with a consumer group, and an expiry
// on about one key in five.
func Generate(ctx context.Context, opts Options) (string, error) {
	opts = opts.withDefaults()
	out := Path(opts)
	if !opts.Force {
		if st, err := os.Stat(out); err == nil && st.Size() > 0 {
			return out, nil
		}
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return "", fmt.Errorf("rdbcorpus: cache dir: %w", err)
	}
	work, err := os.MkdirTemp(opts.Dir, "gen-*")
	if err != nil {
		return "", fmt.Errorf("rdbcorpus: work dir: %w", err)
	}
	defer os.RemoveAll(work)
	srv, err := redisproc.Start(ctx, opts.RedisServer, work)
	if err != nil {
		return "", err
	}
	defer srv.Close()

	start := time.Now()
	fmt.Fprintf(opts.Log, "generating a ~%d MB RDB with redis-server on %s ...\n", opts.SizeMB, srv.Addr())
	g := NewGenerator(opts.Seed)
	// The payload count over-estimates the file by about a fifth (RDB
	// encodings are compact): scale so the file lands near SizeMB.
	budget := int64(opts.SizeMB) << 20 * 6 / 5
	dbs := []struct {
		db    int
		share int64 // percent of the budget
	}{{0, 70}, {1, 20}, {3, 10}}
	err = srv.Pipeline(ctx, func(w *bufio.Writer) error {
		for _, d := range dbs {
			redisproc.WriteCommand(w, "SELECT", strconv.Itoa(d.db))
			g.Fill(w, budget*d.share/100)
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	fmt.Fprintf(opts.Log, "filled in %s (%d commands), saving ...\n", time.Since(start).Round(time.Millisecond), g.commands)
	dump, err := srv.Save()
	if err != nil {
		return "", fmt.Errorf("rdbcorpus: SAVE: %w", err)
	}
	if err := os.Rename(dump, out); err != nil {
		return "", fmt.Errorf("rdbcorpus: keep %s: %w", out, err)
	}
	if st, err := os.Stat(out); err == nil {
		fmt.Fprintf(opts.Log, "wrote %s (%.1f MB) in %s\n", out, float64(st.Size())/(1<<20), time.Since(start).Round(time.Millisecond))
	}
	return out, nil
}

// Generator writes the key mix as RESP commands. Text values are windows of
// a pre-built word buffer (cheap to produce, realistic to compress).
type Generator struct {
	rng      *rand.Rand
	text     []byte // ASCII words plus some multi-byte UTF-8
	seq      int
	commands int
	args     []string
}

func NewGenerator(seed uint64) *Generator {
	g := &Generator{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	words := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
		"kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango", "uniform",
		"victor", "whiskey", "xray", "yankee", "zulu", "the", "of", "and", "session", "user", "cart", "price"}
	// Words JSON must escape or that are multi-byte UTF-8: one word in 50,
	// so most values are plain ASCII as in typical caches, but every path of
	// the exporter's string escaping is exercised.
	special := []string{"héllo", "wörld", "日本語", "données", "ключ", "🙂", "\"quoted\"", "tab\there", "line\nbreak", "back\\slash"}
	var b bytes.Buffer
	for b.Len() < 1<<20 {
		if g.rng.IntN(50) == 0 {
			b.WriteString(special[g.rng.IntN(len(special))])
		} else {
			b.WriteString(words[g.rng.IntN(len(words))])
		}
		b.WriteByte(' ')
	}
	g.text = b.Bytes()
	return g
}

func (g *Generator) textN(n int) string {
	off := g.rng.IntN(len(g.text) - n)
	return string(g.text[off : off+n])
}

func (g *Generator) binaryN(n int) string {
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := g.rng.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return string(b)
}

func (g *Generator) between(lo, hi int) int { return lo + g.rng.IntN(hi-lo+1) }

func (g *Generator) key(prefix string) string {
	g.seq++
	return prefix + strconv.Itoa(g.seq)
}

// cmd writes one command built from args.
func (g *Generator) cmd(w *bufio.Writer, args ...string) {
	redisproc.WriteCommand(w, args...)
	g.commands++
}

// multi writes head followed by items, split into commands of at most 1000
// items (RPUSH/SADD/ZADD/HSET accept repeated calls).
func (g *Generator) multi(w *bufio.Writer, head []string, items []string, per int) {
	const maxItems = 1000
	for len(items) > 0 {
		n := min(len(items), maxItems*per)
		g.args = append(g.args[:0], head...)
		g.args = append(g.args, items[:n]...)
		g.cmd(w, g.args...)
		items = items[n:]
	}
}

// Fill writes keys until about budget bytes of payload have been written.
// The weights are per key drawn; the comments give the typical size.
func (g *Generator) Fill(w *bufio.Writer, budget int64) {
	var written int64
	var items []string
	for written < budget {
		var k string
		r := g.rng.IntN(10000)
		switch {
		case r < 4700: // small text string, 10..120 B
			k = g.key("session:")
			v := g.textN(g.between(10, 120))
			g.cmd(w, "SET", k, v)
			written += int64(len(k) + len(v))
		case r < 5800: // integer string
			k = g.key("counter:")
			var v int64
			switch g.rng.IntN(3) {
			case 0:
				v = int64(g.rng.IntN(10000))
			case 1:
				v = -int64(g.rng.Uint32())
			default:
				v = int64(g.rng.Uint64() >> 1)
			}
			g.cmd(w, "SET", k, strconv.FormatInt(v, 10))
			written += int64(len(k) + 8)
		case r < 5900: // large compressible JSON-like string, 1..32 KiB
			k = g.key("cache:page:")
			n := g.between(1<<10, 32<<10)
			var b bytes.Buffer
			for i := 0; b.Len() < n; i++ {
				fmt.Fprintf(&b, `{"id":%d,"name":"item %d","tags":["red","green"],"price":%d.%02d},`, i, g.rng.IntN(100), g.rng.IntN(1000), g.rng.IntN(100))
			}
			g.cmd(w, "SET", k, b.String())
			written += int64(len(k) + b.Len()/4) // LZF shrinks these about 4x
		case r < 5920: // incompressible binary string, 256 B..32 KiB
			k = g.key("blob:")
			v := g.binaryN(g.between(256, 32<<10))
			g.cmd(w, "SET", k, v)
			written += int64(len(k) + len(v))
		case r < 6920: // small list (listpack)
			k = g.key("queue:")
			items = items[:0]
			for i, n := 0, g.between(3, 30); i < n; i++ {
				if g.rng.IntN(4) == 0 {
					items = append(items, strconv.Itoa(g.rng.IntN(1_000_000)))
				} else {
					items = append(items, g.textN(g.between(5, 40)))
				}
			}
			written += g.push(w, "RPUSH", k, items)
		case r < 6923: // large list (quicklist of many nodes)
			k = g.key("log:")
			items = items[:0]
			for i, n := 0, g.between(1000, 10000); i < n; i++ {
				items = append(items, g.textN(g.between(10, 100)))
			}
			written += g.push(w, "RPUSH", k, items)
		case r < 7523: // intset
			k = g.key("ids:")
			items = items[:0]
			for i, n := 0, g.between(5, 300); i < n; i++ {
				items = append(items, strconv.Itoa(g.rng.IntN(10_000_000)))
			}
			written += g.push(w, "SADD", k, items)
		case r < 7823: // small set of strings
			k = g.key("tags:")
			items = items[:0]
			for i, n := 0, g.between(3, 50); i < n; i++ {
				items = append(items, g.textN(g.between(4, 24)))
			}
			written += g.push(w, "SADD", k, items)
		case r < 7833: // large set (hashtable)
			k = g.key("members:")
			items = items[:0]
			for i, n := 0, g.between(1000, 10000); i < n; i++ {
				items = append(items, "m"+strconv.Itoa(g.rng.IntN(100_000_000)))
			}
			written += g.push(w, "SADD", k, items)
		case r < 8433: // small zset (listpack)
			k = g.key("scores:")
			items = items[:0]
			for i, n := 0, g.between(3, 100); i < n; i++ {
				items = append(items, g.score(), g.textN(g.between(4, 30)))
			}
			written += g.pushPairs(w, "ZADD", k, items)
		case r < 8443: // large zset (skiplist)
			k = g.key("leaderboard:")
			items = items[:0]
			for i, n := 0, g.between(200, 10000); i < n; i++ {
				items = append(items, g.score(), "player:"+strconv.Itoa(g.rng.IntN(10_000_000)))
			}
			written += g.pushPairs(w, "ZADD", k, items)
		case r < 9943: // small hash (listpack)
			k = g.key("user:")
			items = items[:0]
			for i, n := 0, g.between(3, 40); i < n; i++ {
				items = append(items, "field"+strconv.Itoa(i))
				if g.rng.IntN(3) == 0 {
					items = append(items, strconv.Itoa(g.rng.IntN(100000)))
				} else {
					items = append(items, g.textN(g.between(3, 60)))
				}
			}
			written += g.pushPairs(w, "HSET", k, items)
		case r < 9953: // large hash (hashtable)
			k = g.key("profile:")
			items = items[:0]
			for i, n := 0, g.between(200, 5000); i < n; i++ {
				items = append(items, "attr:"+strconv.Itoa(i), g.textN(g.between(5, 100)))
			}
			written += g.pushPairs(w, "HSET", k, items)
		case r < 9963: // stream, rarer still: 10 draws in 10000, half kept
			if g.rng.IntN(2) == 0 {
				continue
			}
			k = g.key("events:")
			for i, n := 0, g.between(50, 2000); i < n; i++ {
				v := g.textN(g.between(5, 50))
				g.cmd(w, "XADD", k, "*", "type", "click", "user", strconv.Itoa(g.rng.IntN(100000)), "payload", v)
				written += int64(30 + len(v))
			}
			if g.rng.IntN(2) == 0 {
				g.cmd(w, "XGROUP", "CREATE", k, "workers", "0")
				g.cmd(w, "XREADGROUP", "GROUP", "workers", "alice", "COUNT", "20", "STREAMS", k, ">")
				g.cmd(w, "XREADGROUP", "GROUP", "workers", "bob", "COUNT", "5", "STREAMS", k, ">")
			}
		default: // small binary-safe string: arbitrary bytes in key and value
			k = g.key("bin:\x00\xff:")
			v := g.binaryN(g.between(8, 64))
			g.cmd(w, "SET", k, v)
			written += int64(len(k) + len(v))
		}
		if g.rng.IntN(5) == 0 {
			// 1 hour .. 90 days from now, so the key is still there on load.
			ms := int64(g.between(3600, 90*86400)) * 1000
			g.cmd(w, "PEXPIRE", k, strconv.FormatInt(ms, 10))
		}
	}
}

func (g *Generator) score() string {
	switch g.rng.IntN(3) {
	case 0:
		return strconv.Itoa(g.rng.IntN(100000))
	case 1:
		return strconv.FormatFloat(g.rng.Float64()*1e6, 'g', -1, 64)
	default:
		return strconv.FormatFloat(-g.rng.Float64(), 'g', -1, 64)
	}
}

func (g *Generator) push(w *bufio.Writer, verb, key string, items []string) int64 {
	g.multi(w, []string{verb, key}, items, 1)
	n := int64(len(key))
	for _, it := range items {
		n += int64(len(it)) + 1
	}
	return n
}

func (g *Generator) pushPairs(w *bufio.Writer, verb, key string, items []string) int64 {
	g.multi(w, []string{verb, key}, items, 2)
	n := int64(len(key))
	for _, it := range items {
		n += int64(len(it)) + 1
	}
	return n
}
