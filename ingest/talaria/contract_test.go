package talaria

import (
	"context"
	"testing"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"
)

// TestContractMatchesTalaria: talaria.proto's service and messages are
// Talaria's own (testdata/upstream-talaria.proto is its proto/talaria.proto
// as published), field for field: names, numbers, types, oneofs and map
// entries, so that its clients' bytes mean the same here; and
// talaria.pb.go is generated from it.
func TestContractMatchesTalaria(t *testing.T) {
	compile := func(dir, file string) *descriptorpb.FileDescriptorProto {
		t.Helper()
		c := protocompile.Compiler{Resolver: &protocompile.SourceResolver{ImportPaths: []string{dir}}}
		files, err := c.Compile(context.Background(), file)
		if err != nil {
			t.Fatalf("compile %s: %v", file, err)
		}
		return protodesc.ToFileDescriptorProto(files[0])
	}
	ours := compile(".", "talaria.proto")
	// The generated Go code is of this proto (gen.go was run after its
	// last change).
	generated := protodesc.ToFileDescriptorProto(File_talaria_proto)
	for i, m := range generated.GetMessageType() {
		if !proto.Equal(m, ours.GetMessageType()[i]) {
			t.Errorf("talaria.pb.go's %s is not talaria.proto's: run go run gen.go", m.GetName())
		}
	}
	theirs := compile("testdata", "upstream-talaria.proto")
	if ours.GetPackage() != theirs.GetPackage() {
		t.Fatalf("package %q, Talaria's %q", ours.GetPackage(), theirs.GetPackage())
	}
	messages := map[string]*descriptorpb.DescriptorProto{}
	for _, m := range theirs.GetMessageType() {
		messages[m.GetName()] = m
	}
	for _, m := range ours.GetMessageType() {
		if !proto.Equal(m, messages[m.GetName()]) {
			t.Errorf("message %s differs from Talaria's:\nours   %v\ntheirs %v", m.GetName(), m, messages[m.GetName()])
		}
	}
	if len(ours.GetMessageType()) != 5 {
		t.Errorf("%d messages, want Ingress's 5", len(ours.GetMessageType()))
	}
	var ingress *descriptorpb.ServiceDescriptorProto
	for _, s := range theirs.GetService() {
		if s.GetName() == "Ingress" {
			ingress = s
		}
	}
	if len(ours.GetService()) != 1 || !proto.Equal(ours.GetService()[0], ingress) {
		t.Errorf("service %v, Talaria's %v", ours.GetService(), ingress)
	}
	if got := "/" + ours.GetPackage() + "." + ingress.GetName() + "/" + ingress.GetMethod()[0].GetName(); got != IngestMethod {
		t.Errorf("IngestMethod %q, the proto's %q", IngestMethod, got)
	}
}
