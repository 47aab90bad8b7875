package archtest

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// kafkaClients is who may import franz-go's client packages: stream owns
// the Kafka client (connections, their TLS and SASL, admin calls), cluster
// takes kgo's key hash only (which partition a key lands in), the
// benchmark harness produces its own load, and the walkthrough's command
// (examples/cluster/local) creates its topic and produces its sample rows, and
// internal/overlaptest, a test helper, produces its messages and resets its
// group's offsets. A server file that opens its own client bypasses the
// connection options stream builds and checks.
var kafkaClients = map[string][]string{
	"github.com/twmb/franz-go/pkg/kgo":  {"stream", "cluster", "bench/kafka", "examples/cluster/local", "internal/overlaptest"},
	"github.com/twmb/franz-go/pkg/kadm": {"stream", "bench/kafka", "examples/cluster/local", "internal/overlaptest"},
}

func TestKafkaClientInStream(t *testing.T) {
	root := repoRoot(t)
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}:{{join .Imports \" \"}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, ":")
		rel := strings.TrimPrefix(strings.TrimPrefix(pkg, modulePath), "/")
		for _, imp := range strings.Fields(imports) {
			allowed, ok := kafkaClients[imp]
			if ok && !slices.Contains(allowed, rel) {
				t.Errorf("package %s imports %s: only %v may (the Kafka client belongs in stream)", rel, imp, allowed)
			}
		}
	}
}
