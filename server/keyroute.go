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

	"github.com/sluicedb/sluice/cluster"
	"github.com/sluicedb/sluice/stream"
	"github.com/sluicedb/sluice/table"
)

// Key routing of cluster queries (docs/cluster.md, "Key queries"): this
// node's side (what it reports, and the gains it announces before storing
// rows of a partition) and the coordinator's (which nodes a key query asks).

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

	ready bool
	// counts are the topics' partition counts read at start; known is
	// closed once they are.
	counts map[string]int32
	known  chan struct{}
	// off, when not empty, is why key routing is off for the table
	// (durably: the record in the store says so too); offDone is closed
	// once every member was told, or one lease has passed.
	off      string
	offDone  chan struct{}
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
				rt = &routedTable{name: n, ts: ts, sourceColumns: ts.cfg.Compact.Iceberg != nil, known: make(chan struct{}),
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
	o.CheckKeys = func(ctx context.Context, msgs []stream.Message) error { return r.checkKeys(ctx, table, msgs) }
}

// offTables says, in table order, which tables' key routing is off and why.
func (r *keyRouter) offTables() []string {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var off []string
	for _, n := range r.s.names {
		if rt := r.tables[n]; rt != nil && rt.off != "" {
			off = append(off, fmt.Sprintf("table %q: %s", n, rt.off))
		}
	}
	return off
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
		th := cluster.TableHoldings{Ready: rt.ready, Off: rt.off, Partitions: maps.Clone(rt.counts),
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
	var grown string
	for topic, parts := range ps {
		for _, p := range parts {
			tp := topicPartition{topic, p}
			rt.assigned[tp] = true
			rt.touched[tp] = r.events
			if n, ok := rt.counts[topic]; ok && p >= n && grown == "" {
				// The topic has more partitions than the rows stored
				// so far were routed by: keys now map elsewhere.
				grown = fmt.Sprintf("topic %s has a partition %d; the table's rows were routed by %d partitions", topic, p, n)
			}
		}
	}
	r.version++
	report := r.holdingsLocked()
	gained := time.Now()
	r.mu.Unlock()
	if grown != "" {
		// Off before any row of the new partitions is stored; the
		// report sent below says so too.
		if err := r.turnOff(ctx, rt, grown); err != nil {
			r.s.log.Error("key routing: recording that routing is off", "table", table, "error", err)
		}
		return
	}
	r.announceOrWait(ctx, table, report, gained, "new partitions")
}

// announceOrWait sends report to every member; when one did not take it,
// it waits until one lease after since (the member's lease on an older
// report has run out by then) or ctx ends.
func (r *keyRouter) announceOrWait(ctx context.Context, table string, report cluster.Holdings, since time.Time, what string) {
	if err := r.announce(ctx, report); err != nil {
		wait := time.Until(since.Add(routeLease))
		r.s.log.Warn("key routing: a member did not take this node's report; waiting out its lease", "table", table, "news", what, "error", err, "wait", wait)
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
}

// routingRecord is what a node's store keeps of a routed table's routing:
// the partition counts its rows were routed by, and why routing is off.
// It outlives restarts because the rows do: a row stored under another
// count or in another partition than its key's stays where it is.
type routingRecord struct {
	Partitions map[string]int32 `json:"partitions"`
	Off        string           `json:"off,omitempty"`
}

// routingRecordName names a table's routingRecord among the store's
// positions (outside every source's names, which begin with the table).
func routingRecordName(table string) string { return "keyrouting\x00" + table }

func (r *keyRouter) readRecord(table string) (routingRecord, error) {
	rec := routingRecord{Partitions: map[string]int32{}}
	v, err := r.s.store.Position(routingRecordName(table))
	if err != nil || v == nil {
		return rec, err
	}
	if err := json.Unmarshal(v, &rec); err != nil {
		return rec, fmt.Errorf("key routing record of table %s: %w", table, err)
	}
	if rec.Partitions == nil {
		rec.Partitions = map[string]int32{}
	}
	return rec, nil
}

func (r *keyRouter) writeRecord(table string, rec routingRecord) error {
	v, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return r.s.store.PutPosition(routingRecordName(table), v)
}

// turnOff turns key routing off for rt, for good: it records why in the
// store, says so in this node's report and sends that to every member (or
// waits out a lease), and only then returns, so that no row that routing
// would miss is stored before every coordinator asks every node. Callers
// that find it being turned off wait for that too.
func (r *keyRouter) turnOff(ctx context.Context, rt *routedTable, why string) error {
	r.mu.Lock()
	if rt.off != "" {
		done := rt.offDone
		r.mu.Unlock()
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	rt.off = why
	rt.offDone = make(chan struct{})
	rt.ts.routingOff.Store(true)
	r.version++
	report := r.holdingsLocked()
	since := time.Now()
	r.mu.Unlock()
	defer close(rt.offDone)
	r.s.log.Error("key routing is off for the table: key queries ask every node", "table", rt.name, "why", why)
	rec, err := r.readRecord(rt.name)
	if err == nil {
		rec.Off = why
		err = r.writeRecord(rt.name, rec)
	}
	r.announceOrWait(ctx, rt.name, report, since, "routing off")
	if err != nil {
		return fmt.Errorf("key routing of table %s: record that it is off: %w", rt.name, err)
	}
	return nil
}

// checkKeys is a source's CheckKeys: every message's key must be in the
// partition Kafka's default partitioner (murmur2) gives it among the
// partitions the table's rows are routed by. A message that is not (a
// producer with another partitioner, a message without a key, a topic
// grown since) turns routing off before it is stored.
func (r *keyRouter) checkKeys(ctx context.Context, table string, msgs []stream.Message) error {
	rt := r.tables[table]
	if rt.ts.routingOff.Load() {
		r.mu.Lock()
		done := rt.offDone
		r.mu.Unlock()
		if done != nil {
			select {
			case <-done:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	// The counts are read at start; a batch waits for them (the brokers
	// that gave it answer the metadata request too).
	select {
	case <-rt.known:
	case <-ctx.Done():
		return ctx.Err()
	}
	r.mu.Lock()
	counts := rt.counts
	r.mu.Unlock()
	partition := cluster.KafkaKeyPartitioner()
	for i := range msgs {
		m := &msgs[i]
		n, ok := counts[m.Topic]
		var why string
		switch {
		case !ok:
			why = fmt.Sprintf("topic %s: its partition count is unknown", m.Topic)
		case m.Key == nil:
			why = fmt.Sprintf("topic %s partition %d offset %d: a message without a key", m.Topic, m.Partition, m.Offset)
		default:
			if want := partition(m.Key, n); want != m.Partition {
				why = fmt.Sprintf("topic %s partition %d offset %d: its key hashes (murmur2, Kafka's default partitioner) to partition %d of %d; the producer partitions otherwise", m.Topic, m.Partition, m.Offset, want, n)
			}
		}
		if why != "" {
			return r.turnOff(ctx, rt, why)
		}
	}
	return nil
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
	mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	counts, err := stream.PartitionCounts(mctx, rt.conn, rt.brokers, rt.topics)
	if err != nil {
		return err
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
	rec, err := r.readRecord(rt.name)
	if err != nil {
		return err
	}
	why := rec.Off
	changed := false
	for topic, n := range counts {
		was, ok := rec.Partitions[topic]
		switch {
		case !ok:
			rec.Partitions[topic], changed = n, true
		case was != n && why == "":
			why = fmt.Sprintf("topic %s has %d partitions; the table's rows in this store were routed by %d", topic, n, was)
		}
	}
	if changed {
		if err := r.writeRecord(rt.name, rec); err != nil {
			return err
		}
	}
	if why != "" && rec.Off == "" {
		r.mu.Lock()
		rt.counts = counts
		r.mu.Unlock()
		if err := r.turnOff(ctx, rt, why); err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rt.counts = counts
	if why != "" && rt.off == "" {
		rt.off = why // found in the record: members learn it from the report
		rt.offDone = make(chan struct{})
		close(rt.offDone)
		rt.ts.routingOff.Store(true)
		r.s.log.Error("key routing is off for the table: key queries ask every node", "table", rt.name, "why", why)
	}
	for _, tp := range stored {
		rt.stored[tp] = true
	}
	select {
	case <-rt.known:
	default:
		close(rt.known)
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
	ready, counts, off := rt.ready, maps.Clone(rt.counts), rt.off
	r.mu.Unlock()
	if off != "" {
		return members, "key routing is off for the table: " + off
	}
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
