package cluster_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/internal/freeport"
)

// keyedNodes makes n nodes (not started) consuming topic in group into the
// keyed table state (key id), with tombstones as deletes.
func keyedNodes(t *testing.T, n int, broker, topic, group string, iceberg bool) []*node {
	dir := t.TempDir()
	nodes := make([]*node, n)
	var members []string
	for i := range nodes {
		port, err := freeport.Port()
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = &node{Name: fmt.Sprintf("node%d", i), URL: fmt.Sprintf("http://127.0.0.1:%d", port)}
		members = append(members, strconv.Quote(nodes[i].URL))
	}
	for _, nd := range nodes {
		nd.Config = filepath.Join(dir, nd.Name+".yaml")
		nd.Log = filepath.Join(dir, nd.Name+".log")
		compact := ""
		if iceberg {
			compact = fmt.Sprintf(`
    compact:
      interval: 2s
      after: 1h
      iceberg:
        warehouse: %s
        catalog: {uri: %q}
        node: %s
        continuous: true
        orphan_interval: -1s
        maintain: {interval: -1s}
`, filepath.Join(dir, "warehouse"), filepath.Join(dir, "catalog.db"), nd.Name)
		}
		cfg := fmt.Sprintf(`
storage: {dir: %q}
listen: {http: %q}
limits: {query_timeout: 1m}
cluster: {members: [%s], node_timeout: 5s}
tables:
  - name: state
    hashBy: id
    sortBy: ts
    primary_key: [id]
    schema:
      - {name: id, type: string}
      - {name: v, type: int64}
      - {name: ts, type: timestamp}
    sources:
      - kafka:
          brokers: [%s]
          topics: [%s]
          group: %s
          session_timeout: 6s
          changes: {format: tombstones}
%s`, filepath.Join(dir, nd.Name), strings.TrimPrefix(nd.URL, "http://"), strings.Join(members, ", "),
			broker, topic, group, compact)
		if err := os.WriteFile(nd.Config, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nd.Kill)
	}
	return nodes
}

// keyedSource produces changes of keys k000..: each an upsert whose v is
// the change's number (increasing across all keys), or a tombstone, keyed
// by the key so that a key stays in one partition; it keeps what the
// topic's final state is and every value each key was given.
type keyedSource struct {
	cl     *kgo.Client
	topic  string
	keys   int
	seq    int64
	rng    *rand.Rand
	final  map[string]int64 // key → v of its last change, absent when deleted
	values map[string]map[int64]bool
}

func (s *keyedSource) produce(t *testing.T, changes int) {
	t.Helper()
	var recs []*kgo.Record
	for range changes {
		s.seq++
		key := fmt.Sprintf("k%03d", s.rng.IntN(s.keys))
		rec := &kgo.Record{Topic: s.topic, Key: []byte(key)}
		if _, live := s.final[key]; live && s.rng.IntN(5) == 0 {
			delete(s.final, key) // a tombstone: its value nil
		} else {
			ts := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC).Add(time.Duration(s.seq) * time.Millisecond).Format(time.RFC3339Nano)
			rec.Value = fmt.Appendf(nil, `{"id":%q,"v":%d,"ts":%q}`, key, s.seq, ts)
			s.final[key] = s.seq
			if s.values[key] == nil {
				s.values[key] = map[int64]bool{}
			}
			s.values[key][s.seq] = true
		}
		recs = append(recs, rec)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// keyedState is a cluster query of the state table through u: key → v.
// A key answered twice is an error.
func keyedState(u string, partial bool) (map[string]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	q := url.Values{"cluster": {"true"}, "columns": {"id,v"}}
	if partial {
		q.Set("partial", "true")
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u+"/v1/tables/state/query?"+q.Encode(), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		var b strings.Builder
		bufio.NewReader(resp.Body).WriteTo(&b)
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, b.String())
	}
	state := map[string]int64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var row struct {
			ID    *string `json:"id"`
			V     *int64  `json:"v"`
			Error string  `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil || row.Error != "" || row.ID == nil || row.V == nil {
			return nil, fmt.Errorf("line %q: %v", sc.Text(), err)
		}
		if _, twice := state[*row.ID]; twice {
			return nil, fmt.Errorf("key %s answered twice (v %d and %d)", *row.ID, state[*row.ID], *row.V)
		}
		state[*row.ID] = *row.V
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if msg := resp.Trailer.Get("Sluice-Error"); msg != "" {
		return nil, fmt.Errorf("trailer: %s", msg)
	}
	return state, nil
}

// stateChecker checks every answer of a run: no key twice (keyedState), a
// key's value one that was produced for it, never older than a value an
// earlier answer showed for it (an older version of a key), and, once a
// whole answer (every node's) lacked a key it had shown, never that value or
// an older one again (a deleted key shown again).
type stateChecker struct {
	src   *keyedSource
	seen  map[string]int64 // key → the newest v an answer showed
	gone  map[string]int64 // key → a v a whole answer no longer showed
	polls int
}

func (c *stateChecker) check(t *testing.T, state map[string]int64, whole bool) {
	t.Helper()
	c.polls++
	for k, v := range state {
		if !c.src.values[k][v] {
			t.Fatalf("poll %d: key %s has v %d, never produced for it", c.polls, k, v)
		}
		if v < c.seen[k] {
			t.Fatalf("poll %d: key %s has v %d after an answer showed v %d: an older version", c.polls, k, v, c.seen[k])
		}
		if g, ok := c.gone[k]; ok && v <= g {
			t.Fatalf("poll %d: key %s has v %d after an answer of every node showed it deleted (at v %d)", c.polls, k, v, g)
		}
		c.seen[k] = v
	}
	if whole {
		for k, v := range c.seen {
			if _, ok := state[k]; !ok {
				c.gone[k] = v
			}
		}
	}
}

// diff describes how state differs from want, key by key (empty: equal).
func diff(state, want map[string]int64) string {
	var d []string
	for k, v := range want {
		if got, ok := state[k]; !ok {
			d = append(d, fmt.Sprintf("%s missing (want v %d)", k, v))
		} else if got != v {
			d = append(d, fmt.Sprintf("%s v %d, want %d", k, got, v))
		}
	}
	for k, v := range state {
		if _, ok := want[k]; !ok {
			d = append(d, fmt.Sprintf("%s v %d, deleted at the source", k, v))
		}
	}
	if len(d) > 8 {
		d = append(d[:8], fmt.Sprintf("and %d more", len(d)-8))
	}
	return strings.Join(d, "; ")
}

// TestKeyedClusterKill9: three nodes consume a keyed table from a
// six-partition topic of keyed upserts and tombstones; one node is killed
// with SIGKILL mid-stream (its partitions move to the others, which
// consume from its last committed offsets) and started again on its store
// (partitions come back). Polled all along, the cluster query never answers
// a key twice or an older version of a key than it answered before; at the
// end it equals the topic's final state key by key, whichever node is
// asked: the killed node's store still holds rows of keys that the others
// changed or deleted meanwhile, which the merge by source position hides.
//
// With iceberg, the table has a continuous cold tier (compact.iceberg on a
// local warehouse, a commit every 2 s): the state is the Iceberg table's
// joined with the stores', and a coordinator answers the Iceberg rows of
// every node's share (without that, the keys a node committed went missing
// from the answers while the node was down).
func TestKeyedClusterKill9(t *testing.T) {
	for _, iceberg := range []bool{false, true} {
		t.Run(fmt.Sprintf("iceberg=%v", iceberg), func(t *testing.T) { testKeyedClusterKill9(t, iceberg) })
	}
}

func testKeyedClusterKill9(t *testing.T, iceberg bool) {
	topic, group := fmt.Sprintf("keyed-kill9-%v", iceberg), fmt.Sprintf("keyed-kill9-%v-group", iceberg)
	broker, producer, _ := kafkaSetup(t, topic)
	nodes := keyedNodes(t, 3, broker, topic, group, iceberg)
	for _, nd := range nodes {
		nd.Start(t)
	}
	src := &keyedSource{cl: producer, topic: topic, keys: 300, rng: rand.New(rand.NewPCG(30, 1)),
		final: map[string]int64{}, values: map[string]map[int64]bool{}}
	chk := &stateChecker{src: src, seen: map[string]int64{}, gone: map[string]int64{}}
	// settle polls through asked until the answer equals the final state,
	// checking each answer.
	settle := func(what string, asked []*node, partial bool, ok func(state map[string]int64) string) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for i := 0; ; i++ {
			state, err := keyedState(asked[i%len(asked)].URL, partial)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			chk.check(t, state, !partial)
			d := ok(state)
			if d == "" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the cluster's state still differs after 90s: %s", what, d)
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
	equal := func(state map[string]int64) string { return diff(state, src.final) }

	for range 3 {
		src.produce(t, 600)
	}
	settle("before the kill", nodes, false, equal)

	victim := nodes[1]
	victim.Kill()
	// While it is down: the keys changed now must reach the others (its
	// partitions moved); the keys only its store held are missing from a
	// partial answer, so only the changed keys are compared.
	before := map[string]int64{}
	for k, v := range src.final {
		before[k] = v
	}
	changed := map[string]bool{}
	lastSeq := src.seq
	for range 3 {
		src.produce(t, 600)
	}
	for k, vs := range src.values {
		for v := range vs {
			if v > lastSeq {
				changed[k] = true
			}
		}
	}
	for k := range before {
		if _, live := src.final[k]; !live {
			changed[k] = true // deleted while the victim was down
		}
	}
	live := []*node{nodes[0], nodes[2]}
	settle("while a node is down", live, true, func(state map[string]int64) string {
		sub, want := map[string]int64{}, map[string]int64{}
		for k := range changed {
			if v, ok := state[k]; ok {
				sub[k] = v
			}
			if v, ok := src.final[k]; ok {
				want[k] = v
			}
		}
		return diff(sub, want)
	})

	victim.Start(t)
	for range 2 {
		src.produce(t, 600)
	}
	settle("after the restart", nodes, false, equal)
	// Asked through each node, the answer is the final state.
	for _, nd := range nodes {
		state, err := keyedState(nd.URL, false)
		if err != nil {
			t.Fatal(err)
		}
		chk.check(t, state, true)
		if d := diff(state, src.final); d != "" {
			t.Fatalf("through %s at the end: %s", nd.Name, d)
		}
	}
	t.Logf("%d changes of %d keys (%d live at the end), %d polls", src.seq, src.keys, len(src.final), chk.polls)
}
