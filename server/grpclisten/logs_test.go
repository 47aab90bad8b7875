package grpclisten

import (
	"testing"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/protobuf/proto"
)

// TestLogsResponse: logsResponse's message, as gRPC's codec marshals it,
// decodes as the ExportLogsServiceResponse a client expects: empty when
// every record was taken, else its partial success.
func TestLogsResponse(t *testing.T) {
	f := func(rejected int64, message string, want *collogs.ExportLogsServiceResponse) {
		t.Helper()
		b, err := proto.Marshal(logsResponse(rejected, message))
		if err != nil {
			t.Fatal(err)
		}
		var got collogs.ExportLogsServiceResponse
		if err := proto.Unmarshal(b, &got); err != nil {
			t.Fatalf("logsResponse(%d, %q): %v", rejected, message, err)
		}
		if !proto.Equal(&got, want) || len(got.ProtoReflect().GetUnknown()) > 0 {
			t.Errorf("logsResponse(%d, %q) = %v, want %v", rejected, message, &got, want)
		}
	}
	f(0, "", &collogs.ExportLogsServiceResponse{})
	f(3, "3 log records were not stored", &collogs.ExportLogsServiceResponse{PartialSuccess: &collogs.ExportLogsPartialSuccess{RejectedLogRecords: 3, ErrorMessage: "3 log records were not stored"}})
}
