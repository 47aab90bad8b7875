package coldtier

import (
	"io"
	"runtime"
	"sync"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/zstd"
)

// arrow-go compresses each Parquet page with a zstd encoder taken from a
// sync.Pool and reset (Encoder.Reset, which allocates the streaming
// state) before it goes back: a pool keeps one encoder per P that used
// one, and the GC's victim cache another, each with its hash tables (1-2
// MiB at the default level). A run at GOMAXPROCS 8 had 30 of its 50 MiB of
// live heap in them (2 day writers compressing at once), and the heap
// grows to twice its live size. boundedZstd replaces arrow-go's zstd
// codec (process-wide: arrow-go looks codecs up by compression type) with
// one that compresses through one shared encoder per level whose
// EncodeAll runs at most zstdEncoders pages at once, each on one of its
// block encoders: the same frames (TestBoundedZstdSameBytes), and as many
// encoders as pages compressed at once, whatever GOMAXPROCS. Decoding
// and the streaming writers are arrow-go's. The block encoders' tables are
// allocated with the shared encoder, so there are as many as the days a
// run writes at once (at most GOMAXPROCS when it is made); a maintenance
// merge compressing at the same time waits for one (a page takes ~0.1 ms).
const zstdEncoders = maxDayWorkers

type boundedZstd struct {
	compress.Codec // arrow-go's, for decoding

	mu       sync.Mutex
	encoders map[zstd.EncoderLevel]*zstd.Encoder
}

// arrowZstd is arrow-go's zstd codec (tests compare the frames).
var arrowZstd compress.Codec

func init() {
	orig, err := compress.GetCodec(compress.Codecs.Zstd)
	if err != nil {
		return // arrow-go without zstd: nothing to replace
	}
	arrowZstd = orig
	compress.RegisterCodec(compress.Codecs.Zstd, newBoundedZstd(orig))
}

func newBoundedZstd(orig compress.Codec) *boundedZstd {
	return &boundedZstd{Codec: orig, encoders: map[zstd.EncoderLevel]*zstd.Encoder{}}
}

// encoder is the shared encoder of a level, with arrow-go's options.
func (z *boundedZstd) encoder(level zstd.EncoderLevel) *zstd.Encoder {
	z.mu.Lock()
	defer z.mu.Unlock()
	enc, ok := z.encoders[level]
	if !ok {
		enc, _ = zstd.NewWriter(nil, zstd.WithZeroFrames(true), zstd.WithEncoderLevel(level),
			zstd.WithEncoderConcurrency(min(zstdEncoders, runtime.GOMAXPROCS(0))), zstd.WithAllLitEntropyCompression(true))
		z.encoders[level] = enc
	}
	return enc
}

func (z *boundedZstd) Encode(dst, src []byte) []byte {
	return z.EncodeLevel(dst, src, compress.DefaultCompressionLevel)
}

// EncodeLevel maps the level as arrow-go does.
func (z *boundedZstd) EncodeLevel(dst, src []byte, level int) []byte {
	l := zstd.EncoderLevelFromZstd(level)
	if level == compress.DefaultCompressionLevel {
		l = zstd.SpeedDefault
	}
	return z.encoder(l).EncodeAll(src, dst[:0])
}

func (z *boundedZstd) DecodeWithError(dst, src []byte) ([]byte, error) {
	if ec, ok := z.Codec.(compress.ErrorCodec); ok {
		return ec.DecodeWithError(dst, src)
	}
	return compress.Decode(z.Codec, dst, src)
}

func (z *boundedZstd) NewReader(r io.Reader) io.ReadCloser {
	return z.Codec.(compress.StreamingCodec).NewReader(r)
}

func (z *boundedZstd) NewWriter(w io.Writer) io.WriteCloser {
	return z.Codec.(compress.StreamingCodec).NewWriter(w)
}

func (z *boundedZstd) NewWriterLevel(w io.Writer, level int) (io.WriteCloser, error) {
	return z.Codec.(compress.StreamingCodec).NewWriterLevel(w, level)
}
