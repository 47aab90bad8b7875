package testkafka

import (
	"encoding/base64"
	"testing"
)

// TestRandomClusterID: the cluster id is what Kafka's Uuid.randomUuid
// prints (16 bytes in URL-safe base64 without padding, 22 characters,
// not starting with '-'), different each time. That the broker accepts
// it is checked by every test that starts one (kafka-storage format
// refuses an id that does not decode to 16 bytes).
func TestRandomClusterID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id, err := randomClusterID()
		if err != nil {
			t.Fatal(err)
		}
		b, err := base64.RawURLEncoding.DecodeString(id)
		if err != nil || len(b) != 16 || len(id) != 22 || id[0] == '-' {
			t.Fatalf("cluster id %q: %d bytes, %v; want 16 bytes in 22 URL-safe characters, not starting with '-'", id, len(b), err)
		}
		if seen[id] {
			t.Fatalf("cluster id %q twice", id)
		}
		seen[id] = true
	}
}
