package schemaformat

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/twmb/avro"

	"github.com/sluicedb/sluice/coltype"
	"github.com/sluicedb/sluice/internal/colbatch"
	"github.com/sluicedb/sluice/internal/testregistry"
)

const testSchema = `{"type":"record","name":"R","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"},
 {"name":"price","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":3}}]}`

func startRegistry(t testing.TB, o testregistry.Options) *testregistry.Registry {
	t.Helper()
	reg, err := testregistry.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	return reg
}

// frame is a wire-format message of schema id around body.
func frame(id int, body []byte) []byte {
	return append(binary.BigEndian.AppendUint32([]byte{0}, uint32(id)), body...)
}

func encode(t testing.TB, schema string, v any) []byte {
	t.Helper()
	b, err := avro.MustParse(schema).Encode(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newDecoder(t testing.TB, format string, r Registry) *Decoder {
	t.Helper()
	d, err := New(format, r)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDecodeErrors: each way a message can fail says so with the error a
// source sorts on (dead letter or pause).
func TestDecodeErrors(t *testing.T) {
	reg := startRegistry(t, testregistry.Options{})
	id := reg.Register("t-value", testregistry.Schema{Schema: testSchema})
	jsonID := reg.Register("j-value", testregistry.Schema{Schema: `{"type":"object"}`, SchemaType: "JSON"})
	d := newDecoder(t, FormatAvro, Registry{URLs: []string{reg.URL}, Timeout: 5 * time.Second})
	ctx := context.Background()
	good := frame(id, encode(t, testSchema, map[string]any{"id": int64(7), "name": "x", "price": []byte{0x30, 0x39}}))
	row, err := d.Decode(ctx, good)
	if err != nil {
		t.Fatal(err)
	}
	// A decimal(9,3) is a decimal column's value (its text: the column of
	// a table created before decimal columns).
	if row["id"] != int64(7) || row["name"] != "x" || row["price"] != (coltype.DecimalValue{Unscaled: 12345, Scale: 3, Precision: 9}) {
		t.Errorf("row %v: want id 7, name x, price the decimal 12.345", row)
	}
	for _, c := range []struct {
		name string
		msg  []byte
		want error
	}{
		{"short", []byte{0, 0, 1}, ErrFraming},
		{"magic", append([]byte{1}, good[1:]...), ErrFraming},
		{"unknown id", frame(4242, []byte{2}), ErrUnknownSchema},
		{"other format's schema", frame(jsonID, []byte("{}")), ErrUnknownSchema},
		{"truncated", good[:len(good)-1], ErrBody},
		{"trailing bytes", append(append([]byte{}, good...), 0), ErrBody},
	} {
		if _, err := d.Decode(ctx, c.msg); !errors.Is(err, c.want) || errors.Is(err, ErrUnavailable) {
			t.Errorf("%s: error %v, want %v", c.name, err, c.want)
		}
	}
}

// TestRegistryUnavailable: a registry that answers 503, refuses the
// credentials, or is not there gives ErrUnavailable (the source pauses),
// never a dead-letter error; a later lookup succeeds once it is back.
func TestRegistryUnavailable(t *testing.T) {
	reg := startRegistry(t, testregistry.Options{Token: "right"})
	id := reg.Register("t-value", testregistry.Schema{Schema: testSchema})
	msg := frame(id, encode(t, testSchema, map[string]any{"id": int64(1), "name": "a", "price": []byte{1}}))
	ctx := context.Background()
	token := func(s string) func() (string, error) { return func() (string, error) { return s, nil } }

	wrong := newDecoder(t, FormatAvro, Registry{URLs: []string{reg.URL}, Token: token("wrong")})
	if _, err := wrong.Decode(ctx, msg); !errors.Is(err, ErrUnavailable) {
		t.Errorf("a refused token: %v, want ErrUnavailable", err)
	}
	d := newDecoder(t, FormatAvro, Registry{URLs: []string{reg.URL}, Token: token("right")})
	reg.SetDown(true)
	if _, err := d.Decode(ctx, msg); !errors.Is(err, ErrUnavailable) {
		t.Errorf("a registry answering 503: %v, want ErrUnavailable", err)
	}
	reg.SetDown(false)
	if _, err := d.Decode(ctx, msg); err != nil {
		t.Errorf("the registry is back: %v", err)
	}
	gone := newDecoder(t, FormatAvro, Registry{URLs: []string{"http://127.0.0.1:1"}, Timeout: 2 * time.Second})
	if _, err := gone.Decode(ctx, msg); !errors.Is(err, ErrUnavailable) {
		t.Errorf("no registry listening: %v, want ErrUnavailable", err)
	}
}

// TestConcurrentColdLookupsShareOne: four callers meet a new schema id at
// once; the registry holds the first request until the other three wait
// for it, and answers one request in all.
func TestConcurrentColdLookupsShareOne(t *testing.T) {
	reg := startRegistry(t, testregistry.Options{})
	id := reg.Register("t-value", testregistry.Schema{Schema: testSchema})
	msg := frame(id, encode(t, testSchema, map[string]any{"id": int64(1), "name": "a", "price": []byte{1}}))
	d := newDecoder(t, FormatAvro, Registry{URLs: []string{reg.URL}})
	const callers = 4
	waiters := make(chan int, callers)
	d.waiting = func(int) { waiters <- 1 }
	var once sync.Once
	reg.BeforeSchemaByID = func(int) {
		once.Do(func() {
			timeout := time.After(5 * time.Second)
			for range callers - 1 {
				select {
				case <-waiters:
				case <-timeout:
					t.Error("the other callers did not wait for the first lookup within 5 s")
					return
				}
			}
		})
	}
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			_, err := d.Decode(context.Background(), msg)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := reg.Lookups(id); n != 1 {
		t.Errorf("the registry answered %d lookups of schema %d, want 1", n, id)
	}
	if _, err := d.Decode(context.Background(), msg); err != nil || reg.Lookups(id) != 1 {
		t.Errorf("a warm decode: %v, %d lookups, want the cache", err, reg.Lookups(id))
	}
}

// BenchmarkSchemaLookup: the cost of finding a message's schema with a
// warm cache (every message after the first of an id) and a cold one (a
// registry round trip over loopback HTTP and compiling the schema).
func BenchmarkSchemaLookup(b *testing.B) {
	reg := startRegistry(b, testregistry.Options{})
	id := reg.Register("t-value", testregistry.Schema{Schema: testSchema})
	ctx := context.Background()
	b.Run("warm", func(b *testing.B) {
		d := newDecoder(b, FormatAvro, Registry{URLs: []string{reg.URL}})
		if _, err := d.schema(ctx, id); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := d.schema(ctx, id); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cold", func(b *testing.B) {
		d := newDecoder(b, FormatAvro, Registry{URLs: []string{reg.URL}})
		b.ReportAllocs()
		for b.Loop() {
			d.mu.Lock()
			clear(d.schemas)
			d.mu.Unlock()
			if _, err := d.schema(ctx, id); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestHostileBodies: random bodies, and bodies claiming a string, array or
// map of 2^31-1 elements, decode or fail as ErrBody (a dead letter), by
// map and by column, never panic nor fail as anything that would pause
// the source.
func TestHostileBodies(t *testing.T) {
	reg := startRegistry(t, testregistry.Options{})
	nested := `{"type":"record","name":"H","fields":[{"name":"s","type":"string"},{"name":"a","type":{"type":"array","items":"long"}},
 {"name":"m","type":{"type":"map","values":"bytes"}}]}`
	avroID := reg.Register("h-value", testregistry.Schema{Schema: nested})
	protoID := reg.Register("p-value", testregistry.Schema{Schema: protoText, SchemaType: "PROTOBUF"})
	decoders := map[int]*Decoder{
		avroID:  newDecoder(t, FormatAvro, Registry{URLs: []string{reg.URL}}),
		protoID: newDecoder(t, FormatProtobuf, Registry{URLs: []string{reg.URL}}),
	}
	huge := []byte{0xfe, 0xff, 0xff, 0xff, 0x0f} // a zigzag varint of 2^31-1
	rnd := rand.New(rand.NewPCG(1, 2))
	for id, d := range decoders {
		bodies := [][]byte{huge, append([]byte{0}, huge...), append([]byte{2, 'x'}, huge...)}
		for range 2000 {
			b := make([]byte, rnd.IntN(40))
			for i := range b {
				b[i] = byte(rnd.Uint32())
			}
			bodies = append(bodies, b)
		}
		for _, b := range bodies {
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("schema %d, body %x: panic %v", id, b, p)
					}
				}()
				if _, err := d.Decode(context.Background(), frame(id, b)); err != nil && !errors.Is(err, ErrBody) {
					t.Fatalf("schema %d, body %x: %v, want nil or ErrBody", id, b, err)
				}
				var cb colbatch.Batch
				if err := d.Rows(&cb).Append(context.Background(), frame(id, b), 1); err != nil && !errors.Is(err, ErrBody) {
					t.Fatalf("schema %d, body %x by column: %v, want nil or ErrBody", id, b, err)
				}
			}()
		}
	}
}
