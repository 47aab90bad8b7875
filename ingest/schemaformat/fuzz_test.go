package schemaformat

import (
	"context"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/colbatch"
	"github.com/sluicedb/sluice/internal/testregistry"
)

// atByte is how a body error names where the body went wrong.
var atByte = regexp.MustCompile(`schema id \d+: .*at byte \d+`)

// fuzzColumns checks one body of schema id against both decoders: the
// column decoder never panics; an error is ErrBody naming the schema id
// and the byte offset; a body both decode gives the same cells.
func fuzzColumns(t *testing.T, d *Decoder, id int, body []byte) {
	msg := frame(id, body)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var cb colbatch.Batch
	err := d.Rows(&cb).Append(ctx, msg, 1)
	if err != nil {
		if !errors.Is(err, ErrBody) {
			t.Fatalf("body %x: %v, want ErrBody", body, err)
		}
		if !atByte.MatchString(err.Error()) && !isFramingError(err) {
			t.Fatalf("body %x: %q names no schema id and byte offset", body, err)
		}
		if cb.Len != 0 {
			t.Fatalf("body %x: a failed row left %d rows", body, cb.Len)
		}
		return
	}
	if _, err := d.decodeMap(ctx, msg); err == nil {
		sameCells(t, d, [][]byte{msg})
	}
}

// isFramingError: Protobuf's message indexes fail before the message
// (they say which index).
func isFramingError(err error) bool {
	return regexp.MustCompile(`schema id \d+: message ind`).MatchString(err.Error())
}

func FuzzAvroColumns(f *testing.F) {
	reg := startRegistry(f, testregistry.Options{})
	id := reg.Register("d-value", testregistry.Schema{Schema: diffAvro})
	d := newDecoder(f, FormatAvro, Registry{URLs: []string{reg.URL}, Timeout: 5 * time.Second})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) { fuzzColumns(t, d, id, body) })
}

func FuzzProtoColumns(f *testing.F) {
	reg := startRegistry(f, testregistry.Options{})
	id := reg.Register("p-value", testregistry.Schema{Schema: diffProto, SchemaType: "PROTOBUF"})
	d := newDecoder(f, FormatProtobuf, Registry{URLs: []string{reg.URL}, Timeout: 5 * time.Second})
	f.Add([]byte{0})
	for _, body := range googleTypeBodies() {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body []byte) { fuzzColumns(t, d, id, body) })
}
