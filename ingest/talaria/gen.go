//go:build ignore

// gen compiles talaria.proto with protocompile (no protoc needed) and runs
// protoc-gen-go on it, writing talaria.pb.go: `go run gen.go` in this
// directory.
package main

import (
	"bytes"
	"context"
	"log"
	"os"
	"os/exec"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/pluginpb"
)

func main() {
	c := protocompile.Compiler{Resolver: &protocompile.SourceResolver{}, SourceInfoMode: protocompile.SourceInfoStandard}
	files, err := c.Compile(context.Background(), "talaria.proto")
	if err != nil {
		log.Fatalf("compile: %v", err)
	}
	fd := protodesc.ToFileDescriptorProto(files[0])
	req := &pluginpb.CodeGeneratorRequest{
		FileToGenerate: []string{"talaria.proto"},
		Parameter:      proto.String("paths=source_relative"),
		ProtoFile:      []*descriptorpb.FileDescriptorProto{fd},
	}
	in, err := proto.Marshal(req)
	if err != nil {
		log.Fatal(err)
	}
	cmd := exec.Command("go", "run", "google.golang.org/protobuf/cmd/protoc-gen-go")
	cmd.Stdin, cmd.Stderr = bytes.NewReader(in), os.Stderr
	out, err := cmd.Output()
	if err != nil {
		log.Fatalf("protoc-gen-go: %v", err)
	}
	var resp pluginpb.CodeGeneratorResponse
	if err := proto.Unmarshal(out, &resp); err != nil {
		log.Fatal(err)
	}
	if resp.Error != nil {
		log.Fatalf("protoc-gen-go: %s", resp.GetError())
	}
	for _, f := range resp.File {
		if err := os.WriteFile(f.GetName(), []byte(f.GetContent()), 0o644); err != nil {
			log.Fatal(err)
		}
	}
}
