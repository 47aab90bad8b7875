package cluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/internal/testkafka"
)

// TestKeyRoutingSASLSSL: nodes whose key_partitioned source reaches the
// brokers through the SASL_SSL listener (a test CA, a client certificate,
// SCRAM-SHA-256 with the password in a file) become ready: the routing's
// own partition lookups speak TLS and SASL as the consumer does, and a
// settled assignment and every row follow.
func TestKeyRoutingSASLSSL(t *testing.T) {
	broker := testkafka.Require(t)
	sec := broker.Secure
	if sec == nil {
		t.Fatal("the package broker has no SASL_SSL listener")
	}
	const topic = "keyed-sasl"
	adm, err := kgo.NewClient(kgo.SeedBrokers(broker.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if resp, err := kadm.NewClient(adm).CreateTopic(context.Background(), partitions, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	pw := filepath.Join(t.TempDir(), "kafka-password")
	if err := os.WriteFile(pw, []byte(sec.Password), 0o600); err != nil {
		t.Fatal(err)
	}
	conn := fmt.Sprintf(`          tls: {ca_file: %q, cert_file: %q, key_file: %q, server_name: %s}
          sasl: {mechanism: SCRAM-SHA-256, username: %s, password: {file: %q}}
`, sec.CAFile, sec.ClientCertFile, sec.ClientKeyFile, sec.ServerName, sec.User, pw)
	nodes := startNodes(t, 2, sec.Addr, topic, topic+"-group", conn)
	settle(t, nodes, topic)
	producer, err := kgo.NewClient(kgo.SeedBrokers(broker.Addr), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	produce(t, producer, topic, 0, 200)
	waitAll(t, nodes[0], 200)
}
