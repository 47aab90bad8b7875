package otlplog

import (
	"context"

	logs "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/emptypb"
)

// ExportMethod is the full name of OTLP's logs export, as gRPC sends it.
const ExportMethod = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"

// LogsServer is what serves OTLP's LogsService. A request is read as the
// LogsData it is on the wire; the answer is Response's.
type LogsServer interface {
	Export(context.Context, *logs.LogsData) (*emptypb.Empty, error)
}

// RegisterLogsServer serves srv's Export on s.
func RegisterLogsServer(s grpc.ServiceRegistrar, srv LogsServer) {
	s.RegisterService(&logsServiceDesc, srv)
}

// logsServiceDesc is what protoc-gen-go-grpc writes for LogsService, with
// LogsData in place of ExportLogsServiceRequest.
var logsServiceDesc = grpc.ServiceDesc{
	ServiceName: "opentelemetry.proto.collector.logs.v1.LogsService",
	HandlerType: (*LogsServer)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Export",
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(logs.LogsData)
			if err := dec(in); err != nil {
				return nil, err
			}
			if interceptor == nil {
				return srv.(LogsServer).Export(ctx, in)
			}
			info := &grpc.UnaryServerInfo{Server: srv, FullMethod: ExportMethod}
			handler := func(ctx context.Context, req any) (any, error) {
				return srv.(LogsServer).Export(ctx, req.(*logs.LogsData))
			}
			return interceptor(ctx, in, info, handler)
		},
	}},
	Metadata: "opentelemetry/proto/collector/logs/v1/logs_service.proto",
}

// The field numbers of ExportLogsServiceResponse (partial_success) and of
// its ExportLogsPartialSuccess (rejected_log_records, error_message).
const (
	fieldPartialSuccess     protowire.Number = 1
	fieldRejectedLogRecords protowire.Number = 1
	fieldErrorMessage       protowire.Number = 2
)

// AppendResponse appends an ExportLogsServiceResponse to buf in its wire
// form: nothing when no record was rejected and there is no message (zero
// bytes are the empty message that says every record was taken), else its
// partial_success with rejected and message.
func AppendResponse(buf []byte, rejected int64, message string) []byte {
	if rejected == 0 && message == "" {
		return buf
	}
	var partial []byte
	if rejected != 0 {
		partial = protowire.AppendTag(partial, fieldRejectedLogRecords, protowire.VarintType)
		partial = protowire.AppendVarint(partial, uint64(rejected))
	}
	if message != "" {
		partial = protowire.AppendTag(partial, fieldErrorMessage, protowire.BytesType)
		partial = protowire.AppendString(partial, message)
	}
	buf = protowire.AppendTag(buf, fieldPartialSuccess, protowire.BytesType)
	return protowire.AppendBytes(buf, partial)
}

// Response is AppendResponse's answer as a message gRPC's codec marshals:
// an Empty whose unknown fields are those bytes, which proto.Marshal
// writes as they are. The client decodes them as the
// ExportLogsServiceResponse they are.
func Response(rejected int64, message string) *emptypb.Empty {
	resp := &emptypb.Empty{}
	if b := AppendResponse(nil, rejected, message); len(b) > 0 {
		resp.ProtoReflect().SetUnknown(b)
	}
	return resp
}
