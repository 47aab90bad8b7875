package coldtier

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/compress"
)

// TestBoundedZstdSameBytes: the zstd codec Parquet pages are compressed
// with is boundedZstd, and its frames are arrow-go's, byte for byte, at
// the default level and others, for pages below and above zstd's 128 KiB
// block, also when pages are compressed at once from more goroutines than
// it has encoders; they decode to the input.
func TestBoundedZstdSameBytes(t *testing.T) {
	codec, err := compress.GetCodec(compress.Codecs.Zstd)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := codec.(*boundedZstd); !ok {
		t.Fatalf("the registered zstd codec is %T, want *boundedZstd", codec)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var inputs [][]byte
	for _, size := range []int{0, 1, 100, 4 << 10, 64 << 10, 200 << 10} {
		buf := make([]byte, size)
		for i := range buf {
			buf[i] = "abcdefgh"[rng.IntN(8)] + byte(i/1000%3) // compressible, not trivially
		}
		inputs = append(inputs, buf)
	}
	var wg sync.WaitGroup
	for _, level := range []int{compress.DefaultCompressionLevel, 1, 3, 7} {
		for i, in := range inputs {
			for g := range 2 * zstdEncoders {
				wg.Add(1)
				go func() {
					defer wg.Done()
					name := fmt.Sprintf("level %d, %d bytes, goroutine %d", level, len(in), g)
					want := arrowZstd.EncodeLevel(nil, in, level)
					got := codec.EncodeLevel(nil, in, level)
					if !bytes.Equal(got, want) {
						t.Errorf("%s (input %d): %d bytes, arrow-go's codec %d bytes", name, i, len(got), len(want))
					}
					back, err := compress.Decode(codec, nil, got)
					if err != nil || !bytes.Equal(back, in) {
						t.Errorf("%s: decodes to %d bytes (%v), want the input", name, len(back), err)
					}
				}()
			}
		}
	}
	wg.Wait()
	if got, want := codec.Encode(nil, inputs[3]), arrowZstd.Encode(nil, inputs[3]); !bytes.Equal(got, want) {
		t.Errorf("Encode: %d bytes, arrow-go's %d", len(got), len(want))
	}
}
