package stream_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// logLines parses every line of a node's log as a JSON object: the log is
// JSON line by line, or the test fails naming the line.
func logLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for i, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("log line %d is not JSON: %q", i+1, line)
			continue
		}
		out = append(out, rec)
	}
	return out
}

// linesWith are the log records whose msg starts with prefix.
func linesWith(recs []map[string]any, prefix string) []map[string]any {
	var out []map[string]any
	for _, r := range recs {
		if msg, _ := r["msg"].(string); strings.HasPrefix(msg, prefix) {
			out = append(out, r)
		}
	}
	return out
}

// readyz returns /readyz's status and body.
func readyz(t *testing.T, n *node) (int, string) {
	t.Helper()
	resp, err := http.Get(n.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// waitReadyz polls /readyz (every 250 ms, up to within) until ok says
// its status and body are what the test waits for.
func waitReadyz(t *testing.T, n *node, within time.Duration, what string, ok func(int, string) bool) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		code, body := readyz(t, n)
		if ok(code, body) {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz after %v: want %s, have %d %s\nlog: %s", within, what, code, body, n.Tail())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestMissingTopicReported: a source whose topic does not exist (a
// misspelling) reaches its broker but consumes nothing. It must not look
// healthy: /readyz 503 naming the topic, sluice_source_up 0, one WARN line
// naming it (not one per check), every log line JSON. Once the topic is
// created the node is ready again, says so, and consumes it.
func TestMissingTopicReported(t *testing.T) {
	t.Parallel()
	broker(t)
	topic := uniqueName("evnts")
	dir := t.TempDir()
	nd := startNode(t, kafkaConfig("events", topic, "g-"+topic, "node-1", "", ""), filepath.Join(dir, "node1"))
	body := waitReadyz(t, nd, 30*time.Second, "503 naming the topic", func(code int, body string) bool {
		return code == http.StatusServiceUnavailable && strings.Contains(body, topic) && strings.Contains(body, "do not exist")
	})
	t.Logf("/readyz: %s", strings.TrimSpace(body))
	if up, ok := nd.metric("sluice_source_up", topic); !ok || up != 0 {
		t.Errorf("sluice_source_up with the topic missing: %v (found %v), want 0", up, ok)
	}
	// Several checks (one each 2 s) have seen it missing by now: one line.
	time.Sleep(5 * time.Second)
	warned := linesWith(logLines(t, nd.Log), "kafka topics do not exist")
	if len(warned) != 1 {
		t.Fatalf("%d lines say the topic is missing, want 1 (logged once, then once a minute):\n%s", len(warned), nd.Tail())
	}
	if lvl := warned[0]["level"]; lvl != "WARN" || !strings.Contains(fmt.Sprint(warned[0]["topics"]), topic) {
		t.Errorf("the missing topic's line: %v", warned[0])
	}

	createTopic(t, topic)
	prod := newProducer(t)
	produceRange(t, prod, topic, 0, 100, 5)
	waitReadyz(t, nd, 30*time.Second, "200", func(code int, _ string) bool { return code == http.StatusOK })
	if up, ok := nd.metric("sluice_source_up", topic); !ok || up != 1 {
		t.Errorf("sluice_source_up once the topic exists: %v (found %v), want 1", up, ok)
	}
	waitRows(t, nd, "events", 100, 2*time.Minute)
	nd.stop()
	if len(linesWith(logLines(t, nd.Log), "kafka topics exist now")) != 1 {
		t.Errorf("no line says the topic exists now:\n%s", nd.Tail())
	}
}
