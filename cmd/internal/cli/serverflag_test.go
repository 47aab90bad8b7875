package cli

import (
	"os"
	"strings"
	"testing"
)

func TestNodeURLFlag(t *testing.T) {
	f := func(in, want, wantErr string) {
		t.Helper()
		var u nodeURL
		err := u.Set(in)
		switch {
		case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
			t.Errorf("--server %q: error %v, want one with %q", in, err, wantErr)
		case wantErr == "" && err != nil:
			t.Errorf("--server %q: %v", in, err)
		case wantErr == "" && string(u) != want:
			t.Errorf("--server %q: %q, want %q", in, u, want)
		}
	}
	f("127.0.0.1:8081", "http://127.0.0.1:8081", "")
	f("node-a:8080", "http://node-a:8080", "")
	f("http://127.0.0.1:8081/", "http://127.0.0.1:8081", "")
	f("https://node-a", "https://node-a", "")
	f("", "", "")
	f("ftp://node-a", "", "want an http:// or https:// URL")
	f("http://", "", "no host")
}

// TestQueryServerWithoutScheme: `sluice query --server 127.0.0.1:PORT`,
// the form a user types after reading the log's listen address, reaches the
// server.
func TestQueryServerWithoutScheme(t *testing.T) {
	yaml, err := os.ReadFile("../../../examples/server/sluice.yaml")
	if err != nil {
		t.Fatal(err)
	}
	url := startTestServer(t, string(yaml))
	out, stderr, code := runCLI(t, "query", "--server", strings.TrimPrefix(url, "http://"), "--table", "events")
	if code != 0 {
		t.Fatalf("query --server without a scheme: exit %d: %s%s", code, out, stderr)
	}
}
