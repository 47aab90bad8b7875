package server

import (
	"testing"

	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/stream"
)

// TestMessageBound: a source's max_message_bytes defaults to
// stream.DefaultMaxMessageBytes and never exceeds limits.max_body_bytes,
// HTTP's bound on a request body after gzip decoding.
func TestMessageBound(t *testing.T) {
	for _, c := range []struct {
		source, body, want int64
	}{
		{0, 64 << 20, stream.DefaultMaxMessageBytes},
		{1 << 20, 64 << 20, 1 << 20},
		{100 << 20, 64 << 20, 64 << 20},
		{0, 1 << 20, 1 << 20},
	} {
		s := &Server{cfg: &config.Config{Limits: config.Limits{MaxBodyBytes: c.body}}}
		if got := s.messageBound(stream.Target{}, c.source).MaxMessageBytes; got != c.want {
			t.Errorf("max_message_bytes %d, max_body_bytes %d: bound %d, want %d", c.source, c.body, got, c.want)
		}
	}
}
