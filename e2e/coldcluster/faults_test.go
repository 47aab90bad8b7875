package coldcluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/internal/testkafka"
)

// cluster is three server children in one consumer group on a fresh topic
// of the package's broker, one SQLite catalog, and a watcher that checks
// every second that no live node's two-tier query returns an id twice.
type cluster struct {
	t         *testing.T
	broker    *testkafka.Broker
	topic     string
	catalog   string
	producer  *kgo.Client
	nodes     []*node
	tables    []string
	rng       *rand.Rand
	live      sync.Map
	stopWatch chan struct{}
	watch     sync.WaitGroup
}

func startCluster(t *testing.T, more ...tableSpec) *cluster {
	t.Helper()
	coldtest.Require(t, s3Err)
	coldtest.Require(t, pyErr)
	c := &cluster{t: t, broker: testkafka.Require(t), tables: []string{"events"}, stopWatch: make(chan struct{})}
	for _, tb := range more {
		c.tables = append(c.tables, tb.name)
	}
	dir := t.TempDir()
	c.topic = fmt.Sprintf("events_%d_%d", os.Getpid(), time.Now().UnixNano())
	adm, err := kgo.NewClient(kgo.SeedBrokers(c.broker.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if resp, err := kadm.NewClient(adm).CreateTopic(ctx, partitions, 1, nil, c.topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	if c.producer, err = kgo.NewClient(kgo.SeedBrokers(c.broker.Addr), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.ProducerLinger(5*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.producer.Close)
	c.catalog = filepath.Join(dir, "catalog.db")
	prefix := "cluster-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	for i := range 3 {
		n := newNode(t, dir, fmt.Sprintf("node-%d", i), c.broker.Addr, c.topic, c.topic, c.catalog, prefix, more...)
		n.Start(t)
		c.nodes = append(c.nodes, n)
		c.live.Store(n, true)
	}
	seed := time.Now().UnixNano()
	c.rng = rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("seed %d", seed)
	c.watch.Go(func() {
		for {
			select {
			case <-c.stopWatch:
				return
			case <-time.After(time.Second):
			}
			for _, n := range c.nodes {
				if up, _ := c.live.Load(n); up == true {
					for _, table := range c.tables {
						tableIDs(t, n, table) // errors: the node is being killed
					}
				}
			}
		}
	})
	t.Cleanup(c.stopWatching)
	return c
}

func (c *cluster) stopWatching() {
	select {
	case <-c.stopWatch:
	default:
		close(c.stopWatch)
	}
	c.watch.Wait()
}

// produce sends ids [from, to) at rate a second in the background; the
// channel is closed when all are acknowledged.
func (c *cluster) produce(from, to, rate int) chan struct{} {
	done := make(chan struct{})
	go func() { defer close(done); produce(c.t, c.producer, c.topic, from, to, rate) }()
	return done
}

// killRounds kills a random node with SIGKILL at a random moment, rounds
// times, and restarts it on its store 7 s later, after its partitions
// moved to the others (session timeout 6 s).
func (c *cluster) killRounds(rounds int) {
	for round := range rounds {
		time.Sleep(time.Duration(500+c.rng.IntN(2000)) * time.Millisecond)
		n := c.nodes[c.rng.IntN(len(c.nodes))]
		c.live.Store(n, false)
		n.Kill()
		c.t.Logf("round %d: killed %s", round, n.Name)
		time.Sleep(7 * time.Second)
		n.Start(c.t)
		c.live.Store(n, true)
	}
}

// checkIceberg counts the ids of table with pyiceberg and DuckDB: each of
// want (ascending) exactly once and nothing else.
func (c *cluster) checkIceberg(table string, want []int64) readers {
	c.t.Helper()
	r := countTable(c.t, c.catalog, table)
	c.t.Logf("%s: snapshots %d; claims %v", table, r.Snapshots, r.Claims)
	check := func(reader string, got counts) {
		if got.Rows != len(want) || got.Distinct != len(want) || got.Dups != 0 || got.Min == nil ||
			*got.Min != want[0] || *got.Max != want[len(want)-1] {
			c.t.Errorf("%s: %s: %d rows, %d distinct ids (%d twice, e.g. %v), ids %v..%v; want %d ids %d..%d each once",
				reader, table, got.Rows, got.Distinct, got.Dups, got.DupSample, deref(got.Min), deref(got.Max),
				len(want), want[0], want[len(want)-1])
		}
	}
	check("pyiceberg", r.PyIceberg)
	if r.DuckDB == nil {
		if os.Getenv("CI") != "" {
			c.t.Fatalf("DuckDB iceberg_scan of %s: %s", table, r.DuckDBError)
		}
		c.t.Logf("DuckDB iceberg_scan of %s not checked: %s", table, r.DuckDBError)
	} else {
		check("duckdb", *r.DuckDB)
	}
	return r
}

// claimOwners parses a sluice.claims.* value (writer:lo-hi,lo-hi;writer:...)
// into the writer of each offset.
func claimOwners(t *testing.T, value string) map[int64]string {
	owners := map[int64]string{}
	for _, part := range strings.Split(value, ";") {
		writer, ranges, ok := strings.Cut(part, ":")
		if !ok {
			t.Fatalf("claims %q: no writer in %q", value, part)
		}
		for _, r := range strings.Split(ranges, ",") {
			var lo, hi int64
			if _, err := fmt.Sscanf(r, "%d-%d", &lo, &hi); err != nil {
				t.Fatalf("claims %q: range %q: %v", value, r, err)
			}
			for o := lo; o < hi; o++ {
				owners[o] = writer
			}
		}
	}
	return owners
}

func deref(p *int64) any {
	if p == nil {
		return "none"
	}
	return *p
}

func idRange(from, to, step int) []int64 {
	var out []int64
	for id := from; id < to; id += step {
		out = append(out, int64(id))
	}
	return out
}

// TestClusterBrokerRestart: the broker is killed (SIGKILL) while ids are
// produced and started again on its ports and log directory a few seconds
// later; the nodes recover by themselves (their clients reconnect, the
// group is formed again, offset commits that failed meanwhile leave
// messages stored but not committed, which a partition that moved stores
// again elsewhere), one node is killed as well, and the Iceberg table holds
// each id exactly once, none missing.
func TestClusterBrokerRestart(t *testing.T) {
	c := startCluster(t)
	const total = 16000
	produced := c.produce(0, total, 2000)
	time.Sleep(time.Duration(2000+c.rng.IntN(2000)) * time.Millisecond)
	c.broker.Kill()
	t.Log("broker killed")
	time.Sleep(3 * time.Second)
	start := time.Now()
	if err := c.broker.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Logf("broker restarted (listening after %v)", time.Since(start).Round(time.Second))
	c.killRounds(1)
	<-produced
	for _, n := range c.nodes {
		waitAll(t, n, total)
	}
	c.stopWatching()
	c.checkIceberg("events", idRange(0, total, 1))
}

// TestClusterTwoTablesOneTopic: every node has two tables fed by one topic
// (events, and events_even whose filter keeps even ids, each through its
// own consumer group into its own Iceberg table); after SIGKILL rounds
// each Iceberg table holds each of its ids exactly once. Their claims are
// separate by design (table properties of each Iceberg table), so the
// rows one table's writers claimed are not skipped in the other.
func TestClusterTwoTablesOneTopic(t *testing.T) {
	evenLua, err := filepath.Abs("testdata/even.lua")
	if err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, tableSpec{name: "events_even", group: fmt.Sprintf("even_%d_%d", os.Getpid(), time.Now().UnixNano()),
		filters: fmt.Sprintf("      - {name: even, func: %q}\n", evenLua)})
	const total = 20000
	produced := c.produce(0, total, 2000)
	c.killRounds(3)
	<-produced
	for _, n := range c.nodes {
		waitTable(t, n, "events", total)
		waitTable(t, n, "events_even", total/2)
	}
	c.stopWatching()
	all := c.checkIceberg("events", idRange(0, total, 1))
	even := c.checkIceberg("events_even", idRange(0, total, 2))
	// Each Iceberg table holds its own claims of the topic's partitions.
	// Where the two name different writers for one offset, a claim shared
	// between the tables would have made one table skip rows the other
	// committed (rows lost, caught above): count those offsets, the part
	// of this run that shows the claims are separate.
	if len(all.Claims) != partitions || len(even.Claims) == 0 {
		t.Errorf("claims: events has %d sources, events_even %d: want %d and at least one", len(all.Claims), len(even.Claims), partitions)
	}
	differ := 0
	for src, v := range even.Claims {
		theirs, ok := all.Claims[src]
		if !ok {
			t.Errorf("events_even claims %s, which events does not", src)
			continue
		}
		other := claimOwners(t, theirs)
		for o, w := range claimOwners(t, v) {
			if other[o] != w {
				differ++
			}
		}
	}
	t.Logf("offsets the two tables' claims give to different writers: %d", differ)
}
