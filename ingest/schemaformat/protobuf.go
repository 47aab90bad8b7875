package schemaformat

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	_ "google.golang.org/protobuf/types/known/durationpb"  // well-known imports of the registry's schemas
	_ "google.golang.org/protobuf/types/known/structpb"    //
	_ "google.golang.org/protobuf/types/known/timestamppb" //
	_ "google.golang.org/protobuf/types/known/wrapperspb"  //

	"github.com/sluicedb/sluice/coltype"
)

// maxMessageIndexes bounds the message-index list of a Protobuf message's
// framing: a hostile count must not allocate.
const maxMessageIndexes = 64

// protoDecoder decodes Protobuf bodies of one registry schema (a .proto
// file): the framing's message indexes name the message type.
type protoDecoder struct {
	file protoreflect.FileDescriptor
	// plans are the column plans of the file's message types (nested
	// ones included), made when the schema is compiled.
	plans map[protoreflect.FullName]*protoPlan
	// first is the plan of the file's first message (indexes [0]).
	first *protoPlan
}

func newProtoDecoder(fd protoreflect.FileDescriptor) *protoDecoder {
	d := &protoDecoder{file: fd, plans: map[protoreflect.FullName]*protoPlan{}}
	var walk func(protoreflect.MessageDescriptors)
	walk = func(msgs protoreflect.MessageDescriptors) {
		for i := range msgs.Len() {
			md := msgs.Get(i)
			d.plans[md.FullName()] = planProto(md)
			walk(md.Messages())
		}
	}
	walk(fd.Messages())
	if fd.Messages().Len() > 0 {
		d.first = d.plans[fd.Messages().Get(0).FullName()]
	}
	return d
}

// compileProto compiles a registry's Protobuf schema whose references are
// refs: .proto text, or a base64 FileDescriptorProto (what Confluent's
// Python serializer registers). Imports of Google's well-known types
// resolve to the ones linked in; any other import is a reference, served
// by its reference name (the import path the referencing file uses),
// compiled before the files that import it.
func compileProto(text string, refs []reference) (bodyDecoder, error) {
	deps := new(protoregistry.Files)
	if err := addProtoReferences(deps, refs); err != nil {
		return nil, fmt.Errorf("protobuf schema: %w", err)
	}
	fd, err := protoFile("", text, deps)
	if err != nil {
		return nil, fmt.Errorf("protobuf schema: %w", err)
	}
	return newProtoDecoder(fd), nil
}

// addProtoReferences compiles refs, each after its own references, into
// deps under their reference names; a file two others import is compiled
// once.
func addProtoReferences(deps *protoregistry.Files, refs []reference) error {
	for _, r := range refs {
		if _, err := deps.FindFileByPath(r.name); err == nil {
			continue
		}
		if err := addProtoReferences(deps, r.deps); err != nil {
			return err
		}
		fd, err := protoFile(r.name, r.schema.Schema, deps)
		if err != nil {
			return fmt.Errorf("reference %q (%s): %w", r.name, r.at, err)
		}
		if err := deps.RegisterFile(fd); err != nil {
			return fmt.Errorf("reference %q (%s): %w", r.name, r.at, err)
		}
	}
	return nil
}

// protoFile compiles one registry file, text or base64 descriptor, its
// imports served by deps then by the well-known types. path is the file's
// import path (a reference's name); "" keeps the descriptor's own name.
func protoFile(path, text string, deps *protoregistry.Files) (protoreflect.FileDescriptor, error) {
	imports := withWellKnown{deps}
	if raw, err := base64.StdEncoding.DecodeString(text); err == nil {
		var fdp descriptorpb.FileDescriptorProto
		if err := proto.Unmarshal(raw, &fdp); err == nil && (fdp.GetName() != "" || len(fdp.GetMessageType()) > 0) {
			switch {
			case path != "":
				fdp.Name = proto.String(path)
			case fdp.Name == nil:
				fdp.Name = proto.String("schema.proto")
			}
			return protodesc.NewFile(&fdp, imports)
		}
	}
	if path == "" {
		path = "schema.proto"
	}
	references := protocompile.ResolverFunc(func(p string) (protocompile.SearchResult, error) {
		fd, err := deps.FindFileByPath(p)
		if err != nil {
			if gt, ok := googleTypeFiles()[p]; ok {
				return protocompile.SearchResult{Desc: gt}, nil
			}
			return protocompile.SearchResult{}, err
		}
		return protocompile.SearchResult{Desc: fd}, nil
	})
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(protocompile.CompositeResolver{
		&protocompile.SourceResolver{Accessor: protocompile.SourceAccessorFromMap(map[string]string{path: text})},
		references,
	})}
	files, err := c.Compile(context.Background(), path)
	if err != nil {
		return nil, err
	}
	// The compiler's descriptors resolve editions features at every
	// HasPresence (a third of a message's decoding in a profile); the
	// protobuf module's own descriptors of the same file answer from a
	// field.
	return protodesc.NewFile(protodesc.ToFileDescriptorProto(files[0]), imports)
}

// withWellKnown finds files and types in the referenced files, then in
// those linked into the binary (Google's well-known types), then among
// google.type's Date and TimeOfDay.
type withWellKnown struct{ deps *protoregistry.Files }

func (w withWellKnown) FindFileByPath(path string) (protoreflect.FileDescriptor, error) {
	if fd, err := w.deps.FindFileByPath(path); err == nil {
		return fd, nil
	}
	fd, err := protoregistry.GlobalFiles.FindFileByPath(path)
	if err != nil {
		if gt, ok := googleTypeFiles()[path]; ok {
			return gt, nil
		}
	}
	return fd, err
}

func (w withWellKnown) FindDescriptorByName(name protoreflect.FullName) (protoreflect.Descriptor, error) {
	if d, err := w.deps.FindDescriptorByName(name); err == nil {
		return d, nil
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(name)
	if err != nil {
		for _, fd := range googleTypeFiles() {
			if m := fd.Messages().ByName(name.Name()); m != nil && m.FullName() == name {
				return m, nil
			}
		}
	}
	return d, err
}

// googleTypeSources are google/type/date.proto and timeofday.proto (from
// googleapis, comments and options left out): Confluent's serializers do
// not register them as references, taking them as known, as they do the
// well-known types; their messages become date and time_of_day values.
var googleTypeSources = map[string]string{
	"google/type/date.proto": `syntax = "proto3";
package google.type;
message Date { int32 year = 1; int32 month = 2; int32 day = 3; }`,
	"google/type/timeofday.proto": `syntax = "proto3";
package google.type;
message TimeOfDay { int32 hours = 1; int32 minutes = 2; int32 seconds = 3; int32 nanos = 4; }`,
}

// googleTypeFiles are googleTypeSources compiled, once.
var googleTypeFiles = sync.OnceValue(func() map[string]protoreflect.FileDescriptor {
	c := protocompile.Compiler{Resolver: &protocompile.SourceResolver{Accessor: protocompile.SourceAccessorFromMap(googleTypeSources)}}
	out := map[string]protoreflect.FileDescriptor{}
	for path := range googleTypeSources {
		files, err := c.Compile(context.Background(), path)
		if err != nil {
			panic(fmt.Sprintf("schemaformat: %s: %v", path, err)) // fixed text: compiles
		}
		fd, err := protodesc.NewFile(protodesc.ToFileDescriptorProto(files[0]), protoregistry.GlobalFiles)
		if err != nil {
			panic(fmt.Sprintf("schemaformat: %s: %v", path, err))
		}
		out[path] = fd
	}
	return out
})

// messageIndexes reads the framing's message indexes: a zigzag varint
// count then that many zigzag varints, a lone 0 meaning [0] (the first
// message of the file).
func messageIndexes(b []byte) ([]int, []byte, error) {
	n, k := binary.Varint(b)
	if k <= 0 {
		return nil, nil, errors.New("message indexes: bad count varint")
	}
	b = b[k:]
	if n == 0 {
		return []int{0}, b, nil
	}
	if n < 0 || n > maxMessageIndexes {
		return nil, nil, fmt.Errorf("message indexes: count %d, want 1 to %d", n, maxMessageIndexes)
	}
	idx := make([]int, n)
	for i := range idx {
		v, k := binary.Varint(b)
		if k <= 0 || v < 0 || v > math.MaxInt32 {
			return nil, nil, fmt.Errorf("message indexes: bad index %d", i)
		}
		idx[i], b = int(v), b[k:]
	}
	return idx, b, nil
}

// message returns the message type the framing's indexes name.
func (d *protoDecoder) message(idx []int) (protoreflect.MessageDescriptor, error) {
	msgs := d.file.Messages()
	var md protoreflect.MessageDescriptor
	for i, x := range idx {
		if x >= msgs.Len() {
			return nil, fmt.Errorf("message index %v: %d messages at level %d", idx, msgs.Len(), i)
		}
		md = msgs.Get(x)
		msgs = md.Messages()
	}
	return md, nil
}

// plan returns the column plan of the message type idx names.
func (d *protoDecoder) plan(idx []int) (*protoPlan, error) {
	md, err := d.message(idx)
	if err != nil {
		return nil, err
	}
	return d.plans[md.FullName()], nil
}

func (d *protoDecoder) decode(body []byte) (map[string]any, error) {
	idx, body, err := messageIndexes(body)
	if err != nil {
		return nil, err
	}
	md, err := d.message(idx)
	if err != nil {
		return nil, err
	}
	return d.mapRow(md, body)
}

// protoField converts a field's value (a list or map as a whole).
func protoField(fd protoreflect.FieldDescriptor, v protoreflect.Value, top bool) (any, error) {
	switch {
	case fd.IsList():
		l := v.List()
		out := make([]any, l.Len())
		for i := range l.Len() {
			x, err := protoScalar(fd, l.Get(i), false)
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	case fd.IsMap():
		out := map[string]any{}
		var err error
		v.Map().Range(func(k protoreflect.MapKey, x protoreflect.Value) bool {
			var c any
			c, err = protoScalar(fd.MapValue(), x, false)
			out[k.String()] = c
			return err == nil
		})
		return out, err
	}
	return protoScalar(fd, v, top)
}

// protoScalar converts one value of fd's kind: integers to int64, floats
// to float64, bytes to base64, an enum to its name, a Timestamp to a time
// (RFC 3339 text inside JSON), a wrapper to its value, another message to
// a JSON object of its set fields.
func protoScalar(fd protoreflect.FieldDescriptor, v protoreflect.Value, top bool) (any, error) {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return v.Bool(), nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return v.Int(), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		u := v.Uint()
		if u > math.MaxInt64 {
			// An int64 column cannot hold it, and a rounded float would
			// lose it: the message is a dead letter, not a wrong row.
			return nil, fmt.Errorf("unsigned value %d over the int64 range", u)
		}
		return int64(u), nil
	case protoreflect.FloatKind:
		f, _ := strconv.ParseFloat(strconv.FormatFloat(v.Float(), 'g', -1, 32), 64)
		return f, nil
	case protoreflect.DoubleKind:
		return v.Float(), nil
	case protoreflect.StringKind:
		return v.String(), nil
	case protoreflect.BytesKind:
		return base64.StdEncoding.EncodeToString(v.Bytes()), nil
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name()), nil
		}
		return strconv.Itoa(int(v.Enum())), nil
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return protoMessage(v.Message(), top)
	}
	return nil, fmt.Errorf("field kind %v", fd.Kind())
}

// googleDate is a google.type.Date as a date (dateOf); ok is false for a
// message of another shape under that name, which stays its fields.
func googleDate(m protoreflect.Message) (coltype.DateValue, bool) {
	if googleTypeOp(m.Descriptor()) != protoDate {
		return 0, false
	}
	f := m.Descriptor().Fields()
	return dateOf(m.Get(f.ByName("year")).Int(), m.Get(f.ByName("month")).Int(), m.Get(f.ByName("day")).Int())
}

// googleTimeOfDay is a google.type.TimeOfDay as a time of day
// (timeOfDayOf); ok is false as googleDate's.
func googleTimeOfDay(m protoreflect.Message) (coltype.TimeOfDayValue, bool) {
	if googleTypeOp(m.Descriptor()) != protoTimeOfDay {
		return 0, false
	}
	f := m.Descriptor().Fields()
	return timeOfDayOf(m.Get(f.ByName("hours")).Int(), m.Get(f.ByName("minutes")).Int(),
		m.Get(f.ByName("seconds")).Int(), m.Get(f.ByName("nanos")).Int())
}

func protoMessage(m protoreflect.Message, top bool) (any, error) {
	md := m.Descriptor()
	switch md.FullName() {
	case "google.protobuf.Timestamp":
		f := md.Fields()
		t := time.Unix(m.Get(f.ByName("seconds")).Int(), m.Get(f.ByName("nanos")).Int()).UTC()
		if top {
			return t, nil
		}
		return t.Format(time.RFC3339Nano), nil
	case "google.protobuf.DoubleValue", "google.protobuf.FloatValue", "google.protobuf.Int64Value",
		"google.protobuf.UInt64Value", "google.protobuf.Int32Value", "google.protobuf.UInt32Value",
		"google.protobuf.BoolValue", "google.protobuf.StringValue", "google.protobuf.BytesValue":
		fd := md.Fields().ByName("value")
		return protoScalar(fd, m.Get(fd), top)
	case "google.type.Date":
		if d, ok := googleDate(m); ok {
			if top {
				return d, nil
			}
			return d.String(), nil
		}
	case "google.type.TimeOfDay":
		if t, ok := googleTimeOfDay(m); ok {
			if top {
				return t, nil
			}
			return t.String(), nil
		}
	}
	out := map[string]any{}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		var c any
		c, err = protoField(fd, v, false)
		out[string(fd.Name())] = c
		return err == nil
	})
	return out, err
}
