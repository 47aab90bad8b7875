package grpclisten

import (
	"context"

	logs "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluicedb/sluice/ingest/otlplog"
)

// OTLP's LogsService. Its request is read as the wire-identical LogsData
// (package otlplog says why), and its descriptor is written by hand:
// the collector package's generated code links grpc-gateway's runtime.

// logsServer is what serves OTLP's LogsService. A request is read as the
// LogsData it is on the wire; the answer is logsResponse's.
type logsServer interface {
	Export(context.Context, *logs.LogsData) (*emptypb.Empty, error)
}

// registerLogsServer serves srv's Export on s.
func registerLogsServer(s grpc.ServiceRegistrar, srv logsServer) {
	s.RegisterService(&logsServiceDesc, srv)
}

// logsServiceDesc is what protoc-gen-go-grpc writes for LogsService, with
// LogsData in place of ExportLogsServiceRequest.
var logsServiceDesc = grpc.ServiceDesc{
	ServiceName: "opentelemetry.proto.collector.logs.v1.LogsService",
	HandlerType: (*logsServer)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Export",
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(logs.LogsData)
			if err := dec(in); err != nil {
				return nil, err
			}
			if interceptor == nil {
				return srv.(logsServer).Export(ctx, in)
			}
			info := &grpc.UnaryServerInfo{Server: srv, FullMethod: otlplog.ExportMethod}
			handler := func(ctx context.Context, req any) (any, error) {
				return srv.(logsServer).Export(ctx, req.(*logs.LogsData))
			}
			return interceptor(ctx, in, info, handler)
		},
	}},
	Metadata: "opentelemetry/proto/collector/logs/v1/logs_service.proto",
}

// logsResponse is otlplog.AppendResponse's answer as a message gRPC's codec marshals:
// an Empty whose unknown fields are those bytes, which proto.Marshal
// writes as they are. The client decodes them as the
// ExportLogsServiceResponse they are.
func logsResponse(rejected int64, message string) *emptypb.Empty {
	resp := &emptypb.Empty{}
	if b := otlplog.AppendResponse(nil, rejected, message); len(b) > 0 {
		resp.ProtoReflect().SetUnknown(b)
	}
	return resp
}
