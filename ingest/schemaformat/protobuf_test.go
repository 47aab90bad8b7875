package schemaformat

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/sluicedb/sluice/internal/testregistry"
)

const protoText = `syntax = "proto3";
package t;
import "google/protobuf/timestamp.proto";
message A { string a = 1; }
message B {
  message C { int64 n = 1; google.protobuf.Timestamp at = 2; }
  C c = 1;
  uint64 big = 2;
}`

// TestProtobufTextSchema: a schema registered as .proto text (what most
// producers other than Confluent's Python register) compiles, and the
// message indexes reach a nested message ([1, 0] is B.C).
func TestProtobufTextSchema(t *testing.T) {
	reg := startRegistry(t, testregistry.Options{})
	id := reg.Register("p-value", testregistry.Schema{Schema: protoText, SchemaType: "PROTOBUF"})
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{"schema.proto": protoText})})}
	files, err := c.Compile(context.Background(), "schema.proto")
	if err != nil {
		t.Fatal(err)
	}
	cd := files[0].Messages().Get(1).Messages().Get(0)
	m := dynamicpb.NewMessage(cd)
	m.Set(cd.Fields().ByName("n"), protoreflect.ValueOfInt64(-7))
	body, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	// Indexes [1, 0]: count 2, then 1 and 0, each a zigzag varint.
	msg := append(frame(id, []byte{4, 2, 0}), body...)
	d := newDecoder(t, FormatProtobuf, Registry{URLs: []string{reg.URL}, Timeout: 5 * time.Second})
	row, err := d.Decode(context.Background(), msg)
	if err != nil {
		t.Fatal(err)
	}
	if row["n"] != int64(-7) || row["at"] != nil || len(row) != 2 {
		t.Errorf("row %v: want n -7 and at null (an unset message field)", row)
	}
	for _, c := range []struct {
		name string
		msg  []byte
		says string
	}{
		{"index past the messages", append(frame(id, []byte{2, 10}), body...), "2 messages at level 0"},
		{"a negative count", append(frame(id, []byte{3}), body...), "count -2"},
		// 127 indexes, each a valid varint: refused by the count alone.
		{"a count over the bound", append(frame(id, []byte{0xfe, 0x01}), make([]byte, 127)...), "count 127, want 1 to 64"},
		{"indexes cut short", frame(id, []byte{4, 2}), "bad index 1"},
	} {
		if _, err := d.Decode(context.Background(), c.msg); !errors.Is(err, ErrBody) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want ErrBody saying %q", c.name, err, c.says)
		}
	}
}
