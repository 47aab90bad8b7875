package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/cluster"
	"github.com/sluicedb/sluice/stream"
	"github.com/sluicedb/sluice/table"
)

// Key routing of cluster queries (docs/cluster.md, "Key queries"): this
// node's side (what it reports, and the gains it announces before storing
// rows of a partition) and the coordinator's (which nodes a key query asks).

// headerAsked lists the members a cluster query asked (this node aside).
const headerAsked = "Sluice-Nodes-Asked"

// The timing of key routing.
const (
	// routeLease is how long a coordinator routes on a node's report.
	routeLease = 3 * time.Second
	// routePoll is how often every member is asked for its report.
	routePoll = 500 * time.Millisecond
	// routeScan is how often a node looks for the rows of partitions it
	// no longer consumes in its store (to stop listing them).
	routeScan = 2 * time.Second
)

// topicPartition names a Kafka partition.
type topicPartition struct {
	topic     string
	partition int32
}

// keyRouter is the key routing of a server with a cluster config and
// tables whose Kafka sources are key_partitioned.
type keyRouter struct {
	s     *Server
	views *cluster.Views
	// client asks members for their reports and announces gains.
	client *http.Client

	mu      sync.Mutex
	version uint64
	// events counts assignments and releases: a scan of the store shows
	// a partition gone only if it was released before the scan began.
	events uint64
	tables map[string]*routedTable
}

// routedTable is a routed table's state on this node.
type routedTable struct {
	name    string
	brokers []string
	topics  []string
	// conn is how the partition lookups reach the brokers: the first
	// key_partitioned source's TLS and SASL (the sources of one routed
	// table are one cluster: their brokers are asked together), or the
	// error building it, reported at each lookup.
	conn    stream.KafkaConn
	connErr error
	// sourceColumns: rows carry their source partition (with a cold
	// tier), so a scan can show that none of a partition is left.
	sourceColumns bool
	ts            *tableState

	ready    bool
	counts   map[string]int32
	assigned map[topicPartition]bool
	// stored are partitions this store stored rows of and may still hold
	// uncommitted (from its stored positions at start, and partitions
	// released since), until a scan finds none of their rows.
	stored  map[topicPartition]bool
	touched map[topicPartition]uint64
}

// newKeyRouter makes the key routing of s; nil when s has no cluster
// config or no key_partitioned table.
func newKeyRouter(s *Server) *keyRouter {
	if s.members == nil {
		return nil
	}
	r := &keyRouter{s: s, views: &cluster.Views{Lease: routeLease}, tables: map[string]*routedTable{},
		client: s.memberClient(routeLease / 2)}
	for _, n := range s.names {
		ts := s.tables[n]
		var rt *routedTable
		for _, sc := range ts.cfg.Sources {
			if sc.Kafka == nil || !sc.Kafka.KeyPartitioned {
				continue
			}
			if rt == nil {
				rt = &routedTable{name: n, ts: ts, sourceColumns: ts.cfg.Compact.Iceberg != nil,
					assigned: map[topicPartition]bool{}, stored: map[topicPartition]bool{}, touched: map[topicPartition]uint64{}}
				rt.conn, rt.connErr = kafkaConn(*sc.Kafka)
			}
			rt.brokers = append(rt.brokers, sc.Kafka.Brokers...)
			rt.topics = append(rt.topics, sc.Kafka.Topics...)
		}
		if rt != nil {
			r.tables[n] = rt
		}
	}
	if len(r.tables) == 0 {
		return nil
	}
	return r
}

// routed reports whether table's rows route by key (HTTP ingest into it
// is refused: its rows would be on a node the routing does not know).
func (r *keyRouter) routed(table string) bool {
	if r == nil {
		return false
	}
	_, ok := r.tables[table]
	return ok
}

// hooks sets the assignment callbacks of a Kafka source of table.
func (r *keyRouter) hooks(table string, o *stream.KafkaOptions) {
	if r == nil || r.tables[table] == nil {
		return
	}
	o.OnAssigned = func(ctx context.Context, ps map[string][]int32) { r.assigned(ctx, table, ps) }
	o.OnReleased = func(ps map[string][]int32) { r.released(table, ps) }
}

// holdings is this node's report.
func (r *keyRouter) holdings() cluster.Holdings {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.holdingsLocked()
}

func (r *keyRouter) holdingsLocked() cluster.Holdings {
	h := cluster.Holdings{Node: r.s.nodeID, Version: r.version, Tables: map[string]cluster.TableHoldings{}}
	for n, rt := range r.tables {
		th := cluster.TableHoldings{Ready: rt.ready, Partitions: maps.Clone(rt.counts),
			Assigned: map[string][]int32{}, Holds: map[string][]int32{}}
		for tp := range rt.assigned {
			th.Assigned[tp.topic] = append(th.Assigned[tp.topic], tp.partition)
		}
		for tp := range rt.holds() {
			th.Holds[tp.topic] = append(th.Holds[tp.topic], tp.partition)
		}
		for _, ps := range th.Assigned {
			slices.Sort(ps)
		}
		for _, ps := range th.Holds {
			slices.Sort(ps)
		}
		h.Tables[n] = th
	}
	return h
}

// holds are the partitions of which the store may hold uncommitted rows.
func (rt *routedTable) holds() map[topicPartition]bool {
	out := maps.Clone(rt.assigned)
	maps.Copy(out, rt.stored)
	return out
}

// assigned is a source's OnAssigned: the partitions join this node's
// holdings, every member is told, and only then (or, if a member did not
// acknowledge, one lease after the gain) may their rows be stored.
func (r *keyRouter) assigned(ctx context.Context, table string, ps map[string][]int32) {
	r.mu.Lock()
	rt := r.tables[table]
	r.events++
	for topic, parts := range ps {
		for _, p := range parts {
			tp := topicPartition{topic, p}
			rt.assigned[tp] = true
			rt.touched[tp] = r.events
			if n, ok := rt.counts[topic]; ok && p >= n {
				// The topic has more partitions than when this node
				// started: keys now map elsewhere. Never routed again
				// until a restart reads the counts anew.
				rt.ready = false
				r.s.log.Error("key routing: the topic has more partitions than at start; key queries ask every node until a restart", "table", table, "topic", topic, "partition", p, "partitions_at_start", n)
			}
		}
	}
	r.version++
	report := r.holdingsLocked()
	gained := time.Now()
	r.mu.Unlock()
	if err := r.announce(ctx, report); err != nil {
		wait := time.Until(gained.Add(routeLease))
		r.s.log.Warn("key routing: a member did not take this node's new partitions; waiting out its lease before storing them", "table", table, "error", err, "wait", wait)
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
}

// released is a source's OnReleased: no more rows of ps are stored here;
// those stored stay in the holdings until a scan finds them committed. A
// partition without a stored position had no row stored here (a batch
// stores its rows and its position at once): it leaves the holdings.
func (r *keyRouter) released(table string, ps map[string][]int32) {
	var stored []topicPartition
	for topic, parts := range ps {
		for _, p := range parts {
			if v, err := r.s.store.Position(stream.PositionName(table, topic, p)); err != nil || v != nil {
				stored = append(stored, topicPartition{topic, p}) // an error: keep it, to be safe
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rt := r.tables[table]
	r.events++
	for topic, parts := range ps {
		for _, p := range parts {
			tp := topicPartition{topic, p}
			delete(rt.assigned, tp)
			rt.touched[tp] = r.events
		}
	}
	for _, tp := range stored {
		rt.stored[tp] = true
	}
	r.version++
}

// announce sends report to every member at once; it fails if one of them
// did not acknowledge it.
func (r *keyRouter) announce(ctx context.Context, report cluster.Holdings) error {
	members, err := r.s.members.Members(ctx)
	if err != nil {
		return err
	}
	body, err := json.Marshal(report)
	if err != nil {
		return err
	}
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, m+"/v1/cluster/holdings", bytes.NewReader(body))
			if err != nil {
				errs[i] = err
				return
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := r.client.Do(req)
			if err != nil {
				errs[i] = fmt.Errorf("%s: %w", m, err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
				errs[i] = fmt.Errorf("%s: status %d", m, resp.StatusCode)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// handleHoldings is POST /v1/cluster/holdings: a member announces its
// report; it is applied before the answer (the member stores rows of its
// new partitions once every member answered).
func (s *Server) handleHoldings(w http.ResponseWriter, r *http.Request) {
	var h cluster.Holdings
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&h); err != nil {
		writeError(w, http.StatusBadRequest, "holdings: "+err.Error())
		return
	}
	// A report about node X is X's alone: a member reporting for another
	// (empty holdings at a huge version) would make key queries skip X.
	if p := principalOf(r); p != nil && p.Node() != h.Node {
		s.audit.refused(r, p, "POST /v1/cluster/holdings", "", http.StatusForbidden, "a holdings report about another node")
		writeError(w, http.StatusForbidden, fmt.Sprintf("holdings: %s may report only its own holdings, not node %q's", p.Name, h.Node))
		return
	}
	if s.router == nil {
		writeError(w, http.StatusNotFound, "holdings: this node routes no table by key")
		return
	}
	if h.Node != s.nodeID && !s.router.views.Announced(h) {
		writeError(w, http.StatusConflict, "holdings: node "+h.Node+" has not answered this node's polls yet")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// run starts the router's background work: the start of each table (its
// partition counts and stored positions), the polls of the members, and
// the scans that drop released partitions once committed.
func (r *keyRouter) run(ctx context.Context, wg *sync.WaitGroup) {
	if r == nil {
		return
	}
	for _, rt := range r.tables {
		wg.Go(func() { r.startTable(ctx, rt) })
	}
	wg.Go(func() { r.pollLoop(ctx) })
	wg.Go(func() { r.scanLoop(ctx) })
}

// startTable reads the topics' partition counts and this store's stored
// positions (a partition with one may have rows here), retrying until
// the brokers answer; then the table's holdings are ready.
func (r *keyRouter) startTable(ctx context.Context, rt *routedTable) {
	for attempt := 0; ; attempt++ {
		err := r.loadTable(ctx, rt)
		if err == nil {
			return
		}
		r.s.log.Warn("key routing: reading the topics' partitions; key queries ask every node meanwhile", "table", rt.name, "error", err, "attempt", attempt)
		select {
		case <-ctx.Done():
			return
		case <-time.After(min(time.Duration(attempt+1)*time.Second, 10*time.Second)):
		}
	}
}

func (r *keyRouter) loadTable(ctx context.Context, rt *routedTable) error {
	if rt.connErr != nil {
		return rt.connErr
	}
	connOpts, err := rt.conn.ClientOpts()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append(connOpts, kgo.SeedBrokers(rt.brokers...), kgo.ClientID("sluice-routing"))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	meta, err := kadm.NewClient(cl).Metadata(mctx, rt.topics...)
	if err != nil {
		return err
	}
	counts := map[string]int32{}
	for _, topic := range rt.topics {
		d, ok := meta.Topics[topic]
		if !ok || d.Err != nil || len(d.Partitions) == 0 {
			return fmt.Errorf("topic %s: no partitions (%v)", topic, d.Err)
		}
		counts[topic] = int32(len(d.Partitions))
	}
	var stored []topicPartition
	for topic, n := range counts {
		for p := range n {
			v, err := r.s.store.Position(stream.PositionName(rt.name, topic, p))
			if err != nil {
				return err
			}
			if v != nil {
				stored = append(stored, topicPartition{topic, p})
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rt.counts = counts
	for _, tp := range stored {
		rt.stored[tp] = true
	}
	for tp := range rt.assigned {
		if tp.partition >= counts[tp.topic] {
			return nil // more partitions than the counts just read: never ready
		}
	}
	rt.ready = true
	r.version++
	return nil
}

// pollLoop asks every member for its report, every routePoll.
func (r *keyRouter) pollLoop(ctx context.Context) {
	t := time.NewTicker(routePoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		members, err := r.s.members.Members(ctx)
		if err != nil {
			continue
		}
		var wg sync.WaitGroup
		for _, m := range members {
			wg.Go(func() { r.poll(ctx, m) })
		}
		wg.Wait()
	}
}

func (r *keyRouter) poll(ctx context.Context, member string) {
	asked := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, member+"/v1/cluster?members=false", nil)
	if err != nil {
		return
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	var info ClusterInfo
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&info) != nil || info.Routing == nil {
		return
	}
	r.views.Polled(member, asked, *info.Routing)
}

// scanLoop drops from the holdings the released partitions of which the
// store holds no row that a query's hot side would return (rows at or
// above the committed-sequence mark): their rows are all in the Iceberg
// table. Only for tables whose rows carry their source partition.
func (r *keyRouter) scanLoop(ctx context.Context) {
	t := time.NewTicker(routeScan)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, rt := range r.tables {
			if err := r.scan(ctx, rt); err != nil && ctx.Err() == nil {
				r.s.log.Warn("key routing: scanning the store for released partitions", "table", rt.name, "error", err)
			}
		}
	}
}

func (r *keyRouter) scan(ctx context.Context, rt *routedTable) error {
	if !rt.sourceColumns {
		return nil
	}
	r.mu.Lock()
	begun := r.events
	waiting := false
	for tp := range rt.stored {
		waiting = waiting || !rt.assigned[tp]
	}
	r.mu.Unlock()
	if !waiting {
		return nil
	}
	mark, err := rt.ts.table.CommittedSeq()
	if err != nil {
		return err
	}
	found := map[topicPartition]bool{}
	unknown := false
	var lastTag string
	err = rt.ts.table.QueryValuesSeqs(ctx, table.Query{Columns: []string{table.SourceBatchColumn}}, mark, 0, func(_ []table.Column, vals []any) error {
		tag, _ := vals[0].(string)
		if tag == lastTag && tag != "" {
			return nil
		}
		lastTag = tag
		tp, ok := kafkaSourceOf(tag)
		if !ok {
			unknown = true // a row without its source: it could be of any partition
			return errStopScan
		}
		found[tp] = true
		return nil
	})
	if err != nil && !errors.Is(err, errStopScan) {
		return err
	}
	if unknown {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	changed := false
	for tp := range rt.stored {
		if !rt.assigned[tp] && !found[tp] && rt.touched[tp] <= begun {
			delete(rt.stored, tp)
			changed = true
		}
	}
	if changed {
		r.version++
	}
	return nil
}

var errStopScan = errors.New("stop the scan")

// kafkaSourceOf reads the partition of a table.SourceBatchColumn value of
// a Kafka source: "kafka/<topic>/<partition>/<topic id>@<first>-<end>".
func kafkaSourceOf(tag string) (topicPartition, bool) {
	src, _, ok := strings.Cut(tag, "@")
	if !ok {
		return topicPartition{}, false
	}
	parts := strings.Split(src, "/")
	if len(parts) != 4 || parts[0] != "kafka" {
		return topicPartition{}, false
	}
	p, err := strconv.ParseInt(parts[2], 10, 32)
	if err != nil {
		return topicPartition{}, false
	}
	return topicPartition{parts[1], int32(p)}, true
}

// route returns the members a cluster query for req must ask: those that
// may hold rows of the partitions of its hashBy values, when req names
// hashBy values of a routed table and this node has a live report of
// every member; otherwise every member (why says why not).
func (r *keyRouter) route(table string, req QueryRequest, members []string) (asked []string, why string) {
	if r == nil || len(req.Hash) == 0 {
		return members, "no hashBy values"
	}
	rt := r.tables[table]
	if rt == nil {
		return members, "the table's sources are not key_partitioned"
	}
	r.mu.Lock()
	ready, counts := rt.ready, maps.Clone(rt.counts)
	r.mu.Unlock()
	if !ready {
		return members, "this node does not know the topics' partitions yet"
	}
	var keyType string
	for _, c := range rt.ts.cfg.Schema {
		if c.Name == rt.ts.cfg.HashBy {
			keyType = c.Type
		}
	}
	want := map[string][]int32{}
	for _, v := range req.Hash {
		key, ok := keyText(v, keyType)
		if !ok {
			return members, fmt.Sprintf("hashBy value %v has no key form", v)
		}
		for topic, n := range counts {
			want[topic] = append(want[topic], cluster.KafkaKeyPartition([]byte(key), n))
		}
	}
	asked, err := r.views.Route(members, r.s.nodeID, table, counts, want)
	if err != nil {
		return members, err.Error()
	}
	return asked, ""
}

// keyText is the message key of a hashBy value (config.KafkaSource's
// KeyPartitioned): a string as it is, an integer in decimal.
func keyText(v any, typ string) (string, bool) {
	switch typ {
	case "string":
		s, ok := v.(string)
		return s, ok
	case "int64":
		var s string
		switch x := v.(type) {
		case string:
			s = x
		case json.Number:
			s = x.String()
		case float64:
			if x != float64(int64(x)) {
				return "", false
			}
			return strconv.FormatInt(int64(x), 10), true
		default:
			return "", false
		}
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return "", false
		}
		return strconv.FormatInt(n, 10), true
	}
	return "", false
}

// ingestRefused says why HTTP ingest into a routed table is refused.
func ingestRefused(name string) string {
	return fmt.Sprintf("table %q takes rows only from its key_partitioned Kafka sources: rows posted to a node would be where key queries do not look (docs/cluster.md, \"Key queries\")", name)
}
