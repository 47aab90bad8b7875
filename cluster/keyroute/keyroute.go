// Package keyroute is key routing of cluster queries (docs/cluster.md,
// "Key queries"): a node's side (what it reports of the Kafka partitions
// its store may hold rows of, and the gains it announces to every member
// before storing rows of a partition) and the coordinator's (which nodes a
// key query asks). The server gives it each routed table's sources and
// store, and calls it from its HTTP handlers and Kafka sources; it knows
// no HTTP route of its own beyond the members' GET /v1/cluster and POST
// /v1/cluster/holdings it sends.
package keyroute

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/cluster"
	"github.com/sluicedb/sluice/stream"
	"github.com/sluicedb/sluice/table"
)

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

// Positions is the store's named positions, where a routed table's
// record (routingRecord) is kept beside its sources' positions.
type Positions interface {
	Position(name string) ([]byte, error)
	PutPosition(name string, value []byte) error
}

// Table is a table whose Kafka sources are key_partitioned, as the router
// needs it.
type Table struct {
	Name    string
	Brokers []string
	Topics  []string
	// Conn is how the partition lookups reach the brokers: the first
	// key_partitioned source's TLS and SASL (the sources of one routed
	// table are one cluster: their brokers are asked together); ConnErr
	// is the error building it, reported at each lookup.
	Conn    stream.KafkaConn
	ConnErr error
	// SourceColumns: rows carry their source partition (with a cold
	// tier), so a scan can show that none of a partition is left.
	SourceColumns bool
	// KeyType is the hashBy column's type: a hashBy value's key form.
	KeyType string
	// Rows is the table's hot store, scanned for released partitions.
	Rows *table.Table
	// Off is set once key routing is off for the table (its metrics and
	// queries read it).
	Off *atomic.Bool
}

// Config is what a Router needs of its node.
type Config struct {
	// Node is this node's id (it changes when the process restarts).
	Node    string
	Members cluster.Members
	// Client asks members for their reports and announces gains (the
	// members' transport; a timeout of half a lease suits it).
	Client *http.Client
	Store  Positions
	Log    *slog.Logger
	// Tables are the routed tables, in the order OffTables reports them.
	Tables []Table
}

// Lease is how long a coordinator routes on a node's report; a Config's
// Client should time out within half of it.
const Lease = routeLease

// Router is the key routing of a node with a cluster config and tables
// whose Kafka sources are key_partitioned. A nil *Router routes nothing.
type Router struct {
	node    string
	members cluster.Members
	store   Positions
	log     *slog.Logger
	order   []string
	views   *cluster.Views
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
	Table

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

// New makes the key routing of a node; nil when it has no cluster
// (Members nil) or no routed table.
func New(c Config) *Router {
	if c.Members == nil || len(c.Tables) == 0 {
		return nil
	}
	r := &Router{node: c.Node, members: c.Members, store: c.Store, log: c.Log, client: c.Client,
		views: &cluster.Views{Lease: routeLease}, tables: map[string]*routedTable{}}
	for _, t := range c.Tables {
		if t.Off == nil {
			t.Off = new(atomic.Bool)
		}
		r.order = append(r.order, t.Name)
		r.tables[t.Name] = &routedTable{Table: t, known: make(chan struct{}),
			assigned: map[topicPartition]bool{}, stored: map[topicPartition]bool{}, touched: map[topicPartition]uint64{}}
	}
	return r
}

// Routed reports whether table's rows route by key (HTTP ingest into it
// is refused: its rows would be on a node the routing does not know).
func (r *Router) Routed(table string) bool {
	if r == nil {
		return false
	}
	_, ok := r.tables[table]
	return ok
}

// Hooks sets the assignment callbacks of a Kafka source of table.
func (r *Router) Hooks(table string, o *stream.KafkaOptions) {
	if r == nil || r.tables[table] == nil {
		return
	}
	o.OnAssigned = func(ctx context.Context, ps map[string][]int32) { r.assigned(ctx, table, ps) }
	o.OnReleased = func(ps map[string][]int32) { r.released(table, ps) }
	o.CheckKeys = func(ctx context.Context, msgs []stream.Message) error { return r.checkKeys(ctx, table, msgs) }
}

// OffTables says, in table order, which tables' key routing is off and why.
func (r *Router) OffTables() []string {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var off []string
	for _, n := range r.order {
		if rt := r.tables[n]; rt != nil && rt.off != "" {
			off = append(off, fmt.Sprintf("table %q: %s", n, rt.off))
		}
	}
	return off
}

// Holdings is this node's report (GET /v1/cluster's routing).
func (r *Router) Holdings() cluster.Holdings {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.holdingsLocked()
}

func (r *Router) holdingsLocked() cluster.Holdings {
	h := cluster.Holdings{Node: r.node, Version: r.version, Tables: map[string]cluster.TableHoldings{}}
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
func (r *Router) assigned(ctx context.Context, table string, ps map[string][]int32) {
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
			r.log.Error("key routing: recording that routing is off", "table", table, "error", err)
		}
		return
	}
	r.announceOrWait(ctx, table, report, gained, "new partitions")
}

// announceOrWait sends report to every member; when one did not take it,
// it waits until one lease after since (the member's lease on an older
// report has run out by then) or ctx ends.
func (r *Router) announceOrWait(ctx context.Context, table string, report cluster.Holdings, since time.Time, what string) {
	if err := r.announce(ctx, report); err != nil {
		wait := time.Until(since.Add(routeLease))
		r.log.Warn("key routing: a member did not take this node's report; waiting out its lease", "table", table, "news", what, "error", err, "wait", wait)
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

func (r *Router) readRecord(table string) (routingRecord, error) {
	rec := routingRecord{Partitions: map[string]int32{}}
	v, err := r.store.Position(routingRecordName(table))
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

func (r *Router) writeRecord(table string, rec routingRecord) error {
	v, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return r.store.PutPosition(routingRecordName(table), v)
}

// turnOff turns key routing off for rt, for good: it records why in the
// store, says so in this node's report and sends that to every member (or
// waits out a lease), and only then returns, so that no row that routing
// would miss is stored before every coordinator asks every node. Callers
// that find it being turned off wait for that too.
func (r *Router) turnOff(ctx context.Context, rt *routedTable, why string) error {
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
	rt.Off.Store(true)
	r.version++
	report := r.holdingsLocked()
	since := time.Now()
	r.mu.Unlock()
	defer close(rt.offDone)
	r.log.Error("key routing is off for the table: key queries ask every node", "table", rt.Name, "why", why)
	rec, err := r.readRecord(rt.Name)
	if err == nil {
		rec.Off = why
		err = r.writeRecord(rt.Name, rec)
	}
	r.announceOrWait(ctx, rt.Name, report, since, "routing off")
	if err != nil {
		return fmt.Errorf("key routing of table %s: record that it is off: %w", rt.Name, err)
	}
	return nil
}

// checkKeys is a source's CheckKeys: every message's key must be in the
// partition Kafka's default partitioner (murmur2) gives it among the
// partitions the table's rows are routed by. A message that is not (a
// producer with another partitioner, a message without a key, a topic
// grown since) turns routing off before it is stored.
func (r *Router) checkKeys(ctx context.Context, table string, msgs []stream.Message) error {
	rt := r.tables[table]
	if rt.Off.Load() {
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
func (r *Router) released(table string, ps map[string][]int32) {
	var stored []topicPartition
	for topic, parts := range ps {
		for _, p := range parts {
			if v, err := r.store.Position(stream.PositionName(table, topic, p)); err != nil || v != nil {
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
func (r *Router) announce(ctx context.Context, report cluster.Holdings) error {
	members, err := r.members.Members(ctx)
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

// Announced applies a member's report that it announced (POST
// /v1/cluster/holdings, which the server authorizes: a report about node
// X is X's alone). It reports false when the member has not answered this
// node's polls yet; this node's own report is always taken.
func (r *Router) Announced(h cluster.Holdings) bool {
	return h.Node == r.node || r.views.Announced(h)
}

// Run starts the router's background work: the start of each table (its
// partition counts and stored positions), the polls of the members, and
// the scans that drop released partitions once committed.
func (r *Router) Run(ctx context.Context, wg *sync.WaitGroup) {
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
func (r *Router) startTable(ctx context.Context, rt *routedTable) {
	for attempt := 0; ; attempt++ {
		err := r.loadTable(ctx, rt)
		if err == nil {
			return
		}
		r.log.Warn("key routing: reading the topics' partitions; key queries ask every node meanwhile", "table", rt.Name, "error", err, "attempt", attempt)
		select {
		case <-ctx.Done():
			return
		case <-time.After(min(time.Duration(attempt+1)*time.Second, 10*time.Second)):
		}
	}
}

func (r *Router) loadTable(ctx context.Context, rt *routedTable) error {
	if rt.ConnErr != nil {
		return rt.ConnErr
	}
	mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	counts, err := stream.PartitionCounts(mctx, rt.Conn, rt.Brokers, rt.Topics)
	if err != nil {
		return err
	}
	var stored []topicPartition
	for topic, n := range counts {
		for p := range n {
			v, err := r.store.Position(stream.PositionName(rt.Name, topic, p))
			if err != nil {
				return err
			}
			if v != nil {
				stored = append(stored, topicPartition{topic, p})
			}
		}
	}
	rec, err := r.readRecord(rt.Name)
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
		if err := r.writeRecord(rt.Name, rec); err != nil {
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
		rt.Off.Store(true)
		r.log.Error("key routing is off for the table: key queries ask every node", "table", rt.Name, "why", why)
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
func (r *Router) pollLoop(ctx context.Context) {
	t := time.NewTicker(routePoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		members, err := r.members.Members(ctx)
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

func (r *Router) poll(ctx context.Context, member string) {
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
	// The member's GET /v1/cluster answer; only its routing matters.
	var info struct {
		Routing *cluster.Holdings `json:"routing"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&info) != nil || info.Routing == nil {
		return
	}
	r.views.Polled(member, asked, *info.Routing)
}

// scanLoop drops from the holdings the released partitions of which the
// store holds no row that a query's hot side would return (rows at or
// above the committed-sequence mark): their rows are all in the Iceberg
// table. Only for tables whose rows carry their source partition.
func (r *Router) scanLoop(ctx context.Context) {
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
				r.log.Warn("key routing: scanning the store for released partitions", "table", rt.Name, "error", err)
			}
		}
	}
}

func (r *Router) scan(ctx context.Context, rt *routedTable) error {
	if !rt.SourceColumns {
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
	mark, err := rt.Rows.CommittedSeq()
	if err != nil {
		return err
	}
	found := map[topicPartition]bool{}
	unknown := false
	var lastTag string
	err = rt.Rows.QueryValuesSeqs(ctx, table.Query{Columns: []string{table.SourceBatchColumn}}, mark, 0, func(_ []table.Column, vals []any) error {
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

// Route returns the members a cluster query for the hashBy values hash
// must ask: those that may hold rows of the values' partitions, when
// table is routed and this node has a live report of every member;
// otherwise every member (why says why not).
func (r *Router) Route(table string, hash []any, members []string) (asked []string, why string) {
	if r == nil || len(hash) == 0 {
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
	want := map[string][]int32{}
	for _, v := range hash {
		key, ok := keyText(v, rt.KeyType)
		if !ok {
			return members, fmt.Sprintf("hashBy value %v has no key form", v)
		}
		for topic, n := range counts {
			want[topic] = append(want[topic], cluster.KafkaKeyPartition([]byte(key), n))
		}
	}
	asked, err := r.views.Route(members, r.node, table, counts, want)
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
