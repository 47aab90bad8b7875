package coldcluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/internal/freeport"
	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/sluicedb/sluice/internal/testkafka"
	"github.com/sluicedb/sluice/internal/testnode"
	"github.com/sluicedb/sluice/internal/testregistry"
)

// A topic whose value schema goes through four versions while three nodes
// consume it into one table committed continuously to Iceberg: the schema
// comes from a real registry (Apicurio Registry's Confluent-compatible API),
// the messages from Confluent's Avro serializer.

// evoPerVersion is how many messages each schema version writes: ids
// [(v-1)*evoPerVersion, v*evoPerVersion) are version v's.
const evoPerVersion = 300

const evoVersions = 4

// evoColumns are the table's columns as the test reads them; ts is read
// as milliseconds since the epoch (the schema's timestamp-millis), exact
// in every engine.
var evoColumns = []string{"id", "account", "ts", "n", "f", "gone", "note", "addr", "tags", "attrs"}

// evoKinds say how each column's value is compared (canonical text).
var evoKinds = []valueKind{kindInt, kindString, kindInt, kindInt, kindFloat, kindString, kindString, kindJSON, kindJSON, kindJSON}

// evoSchema is version v (1-4) of the topic's Avro value schema: v2 adds
// note (a union with null, default null), v3 promotes n and the map's
// values from int to long and f from float to double, v4 removes gone.
// addr, tags and attrs are a nested record, an array and a map.
func evoSchema(v int) string {
	n, f, attrs := `"int"`, `"float"`, `"int"`
	if v >= 3 {
		n, f, attrs = `"long"`, `"double"`, `"long"`
	}
	fields := []string{
		`{"name":"id","type":"long"}`,
		`{"name":"account","type":"string"}`,
		`{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}}`,
		`{"name":"n","type":` + n + `}`,
		`{"name":"f","type":` + f + `}`,
	}
	if v < 4 {
		fields = append(fields, `{"name":"gone","type":"string"}`)
	}
	if v >= 2 {
		fields = append(fields, `{"name":"note","type":["null","string"],"default":null}`)
	}
	fields = append(fields,
		`{"name":"addr","type":{"type":"record","name":"Addr","fields":[{"name":"city","type":"string"},{"name":"zip","type":"int"}]}}`,
		`{"name":"tags","type":{"type":"array","items":"string"}}`,
		`{"name":"attrs","type":{"type":"map","values":`+attrs+`}}`)
	return `{"type":"record","name":"Event","namespace":"sluice.evolution","fields":[` + strings.Join(fields, ",") + `]}`
}

// evoVersion is the schema version that writes id.
func evoVersion(id int) int { return id/evoPerVersion + 1 }

// evoValues are id's values in evoColumns order, nil where its version has
// no such field (or the field is null). After the promotion n and the
// map's value pass 2^31 and f has digits a float does not hold: a version
// decoded with its predecessor's types would lose them.
func evoValues(id int) []any {
	v := evoVersion(id)
	ts := t0.Add(time.Duration(id)*time.Second + time.Duration(id%1000)*time.Millisecond)
	n, attr := int64(-id), int64(id)
	f := float64(id) + 0.5 // exact in a float
	if v >= 3 {
		n, attr = int64(1)<<40+int64(id), int64(1)<<33+int64(id)
		// More digits than a float holds (its shortest form is 600.12347):
		// the Python literal's double.
		f, _ = strconv.ParseFloat(fmt.Sprintf("%d.123456789", id), 64)
	}
	var gone, note any
	if v < 4 {
		gone = fmt.Sprintf("g%d", id)
	}
	if v >= 2 && id%5 != 0 {
		note = fmt.Sprintf("note %d", id)
	}
	return []any{int64(id), fmt.Sprintf("a%d", id%12), ts.UnixMilli(), n, f, gone, note,
		fmt.Sprintf(`{"city":"Zürich \"%d\"","zip":%d}`, id%3, 8000+id%10),
		fmt.Sprintf(`["t","x%d"]`, id), fmt.Sprintf(`{"k":%d}`, attr)}
}

// evoRecord is id's record as the Python serializer takes it.
func evoRecord(id int) string {
	vals := evoValues(id)
	ts := time.UnixMilli(vals[2].(int64)).UTC()
	py := func(x any) string {
		if x == nil {
			return "None"
		}
		return strconv.Quote(x.(string))
	}
	r := fmt.Sprintf(`{"id": %d, "account": %q, "ts": datetime(%d, %d, %d, %d, %d, %d, %d, tzinfo=timezone.utc), "n": %d, "f": %s,
 "addr": {"city": "Zürich \"%d\"", "zip": %d}, "tags": ["t", "x%d"], "attrs": {"k": %d}`,
		id, vals[1], ts.Year(), ts.Month(), ts.Day(), ts.Hour(), ts.Minute(), ts.Second(), ts.Nanosecond()/1000,
		vals[3], strconv.FormatFloat(vals[4].(float64), 'g', -1, 64), id%3, 8000+id%10, id, evoAttr(vals[9].(string)))
	if v := evoVersion(id); v < 4 {
		r += `, "gone": ` + py(vals[5])
	}
	if evoVersion(id) >= 2 {
		r += `, "note": ` + py(vals[6])
	}
	return r + "}"
}

func evoAttr(attrs string) int64 {
	var m map[string]int64
	if err := json.Unmarshal([]byte(attrs), &m); err != nil {
		panic(err)
	}
	return m["k"]
}

type valueKind int

const (
	kindInt valueKind = iota
	kindFloat
	kindString
	kindJSON
)

// canonical is a value from any reader (Go values, json.Number, JSON text
// or decoded JSON) as comparable text: "null", an integer in decimal, a
// float in its shortest form, a quoted string, JSON re-encoded with its
// keys sorted.
func canonical(kind valueKind, v any) (string, error) {
	if v == nil {
		return "null", nil
	}
	switch kind {
	case kindInt:
		switch x := v.(type) {
		case int64:
			return strconv.FormatInt(x, 10), nil
		case json.Number:
			n, err := strconv.ParseInt(string(x), 10, 64)
			return strconv.FormatInt(n, 10), err
		}
	case kindFloat:
		switch x := v.(type) {
		case float64:
			return strconv.FormatFloat(x, 'g', -1, 64), nil
		case json.Number:
			f, err := strconv.ParseFloat(string(x), 64)
			return strconv.FormatFloat(f, 'g', -1, 64), err
		}
	case kindString:
		if s, ok := v.(string); ok {
			return strconv.Quote(s), nil
		}
	case kindJSON:
		if s, ok := v.(string); ok {
			d := json.NewDecoder(strings.NewReader(s))
			d.UseNumber()
			if err := d.Decode(&v); err != nil {
				return "", fmt.Errorf("JSON column %q: %w", s, err)
			}
		}
		b, err := json.Marshal(v)
		return string(b), err
	}
	return "", fmt.Errorf("a %T (%v) where a value of kind %d belongs", v, v, kind)
}

// evoWant is every id's row as canonical text.
func evoWant(t testing.TB) map[int64][]string {
	t.Helper()
	want := map[int64][]string{}
	for id := range evoVersions * evoPerVersion {
		row, err := canonicalRow(evoValues(id))
		if err != nil {
			t.Fatal(err)
		}
		want[int64(id)] = row
	}
	return want
}

func canonicalRow(vals []any) ([]string, error) {
	row := make([]string, len(vals))
	for i, v := range vals {
		c, err := canonical(evoKinds[i], v)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", evoColumns[i], err)
		}
		row[i] = c
	}
	return row, nil
}

// checkEvoRows fails t unless rows (in evoColumns order) are want's, each
// id once, every value equal.
func checkEvoRows(t testing.TB, reader string, rows [][]any, want map[int64][]string) {
	t.Helper()
	seen := map[int64]int{}
	bad := 0
	for _, r := range rows {
		got, err := canonicalRow(r)
		if err != nil {
			t.Errorf("%s: row %v: %v", reader, r, err)
			return
		}
		id, _ := strconv.ParseInt(got[0], 10, 64)
		seen[id]++
		w, ok := want[id]
		if !ok {
			t.Errorf("%s: a row of id %s, which was never produced: %v", reader, got[0], got)
			continue
		}
		for i := range w {
			if got[i] != w[i] {
				if bad++; bad <= 8 {
					t.Errorf("%s: id %d (schema v%d): %s = %s, want %s", reader, id, evoVersion(int(id)), evoColumns[i], got[i], w[i])
				}
			}
		}
	}
	missing, twice := 0, 0
	for id := range want {
		switch seen[id] {
		case 0:
			missing++
		case 1:
		default:
			twice++
		}
	}
	if missing > 0 || twice > 0 || bad > 0 {
		t.Errorf("%s: %d rows: %d ids missing, %d read more than once, %d values differ (want each of %d ids once)",
			reader, len(rows), missing, twice, bad, len(want))
	}
}

// evoNode is a node of the test: newNode's layout, its table's schema
// from the registry's Avro schemas (no static schema), the cluster's
// members for a cluster query, commits through the REST catalog.
func evoNode(t testing.TB, dir, name, broker, topic, registry, restURI, prefix string, port int, members []string) *node {
	t.Helper()
	n := &node{Node: testnode.Node{Name: name, URL: fmt.Sprintf("http://127.0.0.1:%d", port)}, dir: filepath.Join(dir, name)}
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	n.Config = filepath.Join(dir, name+".yaml")
	cfg := fmt.Sprintf(`
storage: {dir: %q}
listen: {http: "127.0.0.1:%d"}
cluster: {members: [%s], node_timeout: 10s}
tables:
  - name: events
    hashBy: account
    sortBy: ts
    sources:
      - kafka:
          brokers: [%s]
          topics: [%s]
          group: %s
          session_timeout: 6s
          format: avro
          schema_registry: {urls: [%q]}
    compact:
      interval: 1s
      after: 2s
      remove: true
      iceberg:
        warehouse: s3://%s/%s
        s3: {endpoint: %q, region: us-east-1, path_style: true}
        catalog: {type: rest, uri: %q}
        node: %s
        continuous: true
        orphan_interval: -1s
`, filepath.Join(n.dir, "data"), port, strings.Join(members, ", "), broker, topic, topic, registry,
		coldtest.Bucket, prefix, s3.Endpoint, restURI, name)
	if err := os.WriteFile(n.Config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	n.Log = filepath.Join(dir, name+".log")
	t.Cleanup(n.Kill)
	return n
}

// clusterRows is a cluster query's answer from node n: every row of the
// cluster (the Iceberg table and each node's uncommitted rows), in
// evoColumns order with ts in milliseconds.
func clusterRows(ctx context.Context, n *node) ([][]any, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.URL+"/v1/tables/events/query?cluster=true&format=ndjson", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: cluster query: %w", n.Name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("%s: cluster query: %s: %s", n.Name, resp.Status, b)
	}
	var rows [][]any
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		d := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		d.UseNumber()
		var m map[string]any
		if err := d.Decode(&m); err != nil {
			return nil, fmt.Errorf("%s: cluster query line %q: %w", n.Name, sc.Bytes(), err)
		}
		if e, ok := m["error"]; ok && len(m) == 1 {
			return nil, fmt.Errorf("%s: cluster query: %v", n.Name, e)
		}
		if s, ok := m["ts"].(string); ok {
			ts, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return nil, fmt.Errorf("%s: ts %q: %w", n.Name, s, err)
			}
			m["ts"] = ts.UnixMilli()
		}
		row := make([]any, len(evoColumns))
		for i, c := range evoColumns {
			row[i] = m[c]
		}
		rows = append(rows, row)
	}
	return rows, sc.Err()
}

// TestClusterSchemaEvolution: three nodes in one consumer group read an
// Avro topic of 6 partitions, each message framed with its schema's id by
// Confluent's serializer, the schemas in Apicurio Registry, while the
// value schema goes through four versions (v2 adds a field with a
// default, v3 promotes int to long and float to double, v4 removes a
// field) and one node is killed with SIGKILL in the middle and restarted
// on its store. Every node commits continuously into one Iceberg table
// (the REST catalog, whose API Trino also reads; versitygw S3). Then every
// produced value is read back exactly once, nulls where a version lacked
// the field, nested record, array and map as their JSON text, by sluice's
// cluster query, pyiceberg, DuckDB, Spark and Trino; no message is a dead
// letter.
func TestClusterSchemaEvolution(t *testing.T) {
	if testenv.RaceEnabled {
		// Its server children are this test binary; it checks what five
		// readers see, not races (the code it runs is raced in its
		// packages' tests).
		t.Skip("TestClusterSchemaEvolution runs in scripts/test's no-race phase")
	}
	began := time.Now()
	coldtest.Require(t, s3Err)
	coldtest.Require(t, pyErr)
	broker := testkafka.Require(t)
	clients := testregistry.RequirePython(t)
	spark := sharedSpark.Require(t)
	coldtest.Require(t, coldtest.FindTrino())
	registry := apicurio.Require(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// The fixture's in-memory SQLite fails concurrent requests; a file
	// serves the three nodes' commits (as in TestClusterHour).
	rest, err := coldtest.StartREST(dir, "CATALOG_URI=jdbc:sqlite:file:"+filepath.Join(dir, "rest-catalog.db"),
		"CATALOG_IO__IMPL=org.apache.iceberg.aws.s3.S3FileIO", "CATALOG_S3_ENDPOINT="+s3.Endpoint,
		"CATALOG_S3_PATH__STYLE__ACCESS=true", "CATALOG_CLIENT_REGION="+coldtest.Region)
	coldtest.Require(t, err)
	defer rest.Stop()

	// Trino starts (tens of seconds) while the topic is produced and consumed.
	type trinoStart struct {
		tr  *coldtest.Trino
		err error
	}
	trinoReady := make(chan trinoStart, 1)
	go func() {
		tr, err := sharedTrino.Get()
		if err == nil {
			err = tr.CreateCatalog(ctx, "evolution", trinoRESTCatalog(rest.URI))
		}
		trinoReady <- trinoStart{tr, err}
	}()
	defer func() {
		if ts := <-trinoReady; ts.err == nil {
			dropCatalog(ts.tr, "evolution")
		}
	}()

	topic := fmt.Sprintf("evolution_%d_%d", os.Getpid(), time.Now().UnixNano())
	adm, err := kgo.NewClient(kgo.SeedBrokers(broker.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if resp, err := kadm.NewClient(adm).CreateTopic(ctx, partitions, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}

	prefix := "evolution-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	ports := make([]int, 3)
	members := make([]string, 3)
	for i := range ports {
		if ports[i], err = freeport.Port(); err != nil {
			t.Fatal(err)
		}
		members[i] = fmt.Sprintf("http://127.0.0.1:%d", ports[i])
	}
	var nodes []*node
	for i := range 3 {
		n := evoNode(t, dir, fmt.Sprintf("node-%d", i), broker.Addr, topic, registry.URL, rest.URI, prefix, ports[i], members)
		n.Start(t)
		nodes = append(nodes, n)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range nodes {
				t.Logf("%s's log (end): %s", n.Name, n.Tail())
			}
		}
	})

	po := testregistry.ProduceOptions{Brokers: broker.Addr, Topic: topic, Registry: registry.URL, KeyField: "account"}
	produceVersion := func(v int) error {
		b := testregistry.Batch{Format: "avro", Schema: evoSchema(v)}
		for id := (v - 1) * evoPerVersion; id < v*evoPerVersion; id++ {
			b.Records = append(b.Records, evoRecord(id))
		}
		return testregistry.Produce(ctx, clients, po, b)
	}
	total := evoVersions * evoPerVersion
	stored := func() int {
		rows, err := clusterRows(ctx, nodes[0])
		if err != nil {
			return -1
		}
		return len(rows)
	}
	waitStored := func(want int) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for got := stored(); got < want; got = stored() {
			if time.Now().After(deadline) {
				t.Fatalf("the cluster query answers %d rows after 90 s, want %d", got, want)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	// v1; then v2 with node-1 killed while it is consumed; v3 while
	// node-1 is down (its partitions move to the others after the
	// session timeout); node-1 back on its store; v4.
	if err := produceVersion(1); err != nil {
		t.Fatal(err)
	}
	waitStored(evoPerVersion)
	v2 := make(chan error, 1)
	go func() { v2 <- produceVersion(2) }()
	waitStored(evoPerVersion + 1)
	nodes[1].Kill()
	killedAt := time.Now()
	if err := <-v2; err != nil {
		t.Fatal(err)
	}
	if err := produceVersion(3); err != nil {
		t.Fatal(err)
	}
	nodes[1].Start(t)
	t.Logf("node-1 killed with SIGKILL once v2's first rows were stored, restarted %.1f s later", time.Since(killedAt).Seconds())
	if err := produceVersion(4); err != nil {
		t.Fatal(err)
	}
	for v := 1; v <= evoVersions; v++ {
		if _, err := registry.SchemaID(ctx, topic+"-value", v); err != nil {
			t.Fatalf("the registry has no version %d of the value schema: %v", v, err)
		}
	}

	// Every row committed: the current snapshot holds total rows (a row
	// committed twice would show as more).
	s := &sampler{rest: rest.URI, root: s3.Root}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		cur, err := s.take(began)
		if err == nil && cur.records >= int64(total) {
			if cur.records > int64(total) {
				t.Errorf("the Iceberg table holds %d rows for %d messages", cur.records, total)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Iceberg table holds %d of %d rows after 2 minutes (%v)", cur.records, total, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	committed := time.Since(began)

	want := evoWant(t)
	rows, err := clusterRows(ctx, nodes[2])
	if err != nil {
		t.Fatal(err)
	}
	checkEvoRows(t, "sluice's cluster query", rows, want)
	for _, n := range nodes {
		if dead := deadLetterRows(t, n); dead != 0 {
			t.Errorf("%s holds %d dead letters, want none: every version's messages fit the table", n.Name, dead)
		}
	}

	// The engines, at once: pyiceberg and DuckDB (one Python), Spark, Trino.
	readStart := time.Now()
	var mu sync.Mutex
	var wg sync.WaitGroup
	read := map[string][][]any{}
	var readErrs []error
	done := func(reader string, rows [][]any, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			readErrs = append(readErrs, fmt.Errorf("%s: %w", reader, err))
			return
		}
		read[reader] = rows
	}
	wg.Go(func() {
		out, err := sparkSQL(spark, dir, rest.URI, "SELECT id, account, unix_millis(ts) AS ts, "+strings.Join(evoColumns[3:], ", ")+" FROM sluice.sluice.events")
		if err != nil {
			done("Spark", nil, err)
			return
		}
		rows, err := sparkRows(out)
		done("Spark", rows, err)
	})
	wg.Go(func() {
		ts := <-trinoReady
		trinoReady <- ts // for the deferred Stop
		if ts.err != nil {
			done("Trino", nil, ts.err)
			return
		}
		_, rows, err := ts.tr.Query(ctx, "SELECT id, account, date_diff('millisecond', from_unixtime(0), ts) AS ts, "+
			strings.Join(evoColumns[3:], ", ")+" FROM evolution.sluice.events")
		if err != nil {
			log, _ := os.ReadFile(ts.tr.Log)
			err = fmt.Errorf("%w\nTrino log (end): %s", err, log[max(0, len(log)-3000):])
		}
		done("Trino", rows, err)
	})
	script, err := os.ReadFile("testdata/evolution.py")
	if err != nil {
		t.Fatal(err)
	}
	pyOut, pyRunErr := pyPool.Run(ctx, string(script), append([]string{rest.URI, "sluice.events", s3.Endpoint,
		coldtest.AccessKey, coldtest.SecretKey, "ts"}, slices.Concat(evoColumns[:2], evoColumns[3:])...)...)
	wg.Wait()
	if pyRunErr != nil {
		t.Fatal(pyRunErr)
	}
	for _, err := range readErrs {
		t.Error(err)
	}
	var py struct {
		PyIceberg   [][]any `json:"pyiceberg"`
		DuckDB      [][]any `json:"duckdb"`
		DuckDBError string  `json:"duckdb_error"`
	}
	d := json.NewDecoder(bytes.NewReader(pyOut))
	d.UseNumber()
	if err := d.Decode(&py); err != nil {
		t.Fatalf("evolution.py: %v: %.2000s", err, pyOut)
	}
	// evolution.py puts ts first: back to its place.
	for _, rows := range [][][]any{py.PyIceberg, py.DuckDB} {
		for i, r := range rows {
			rows[i] = slices.Concat(r[1:3], r[:1], r[3:])
		}
	}
	read["pyiceberg"] = py.PyIceberg
	if py.DuckDBError != "" {
		if testenv.InCI() {
			t.Errorf("DuckDB iceberg_scan: %s", py.DuckDBError)
		} else {
			t.Logf("DuckDB iceberg_scan not checked: %s", py.DuckDBError)
		}
	} else {
		read["DuckDB"] = py.DuckDB
	}
	for _, reader := range []string{"pyiceberg", "DuckDB", "Spark", "Trino"} {
		if rows, ok := read[reader]; ok {
			checkEvoRows(t, reader, rows, want)
		}
	}
	t.Logf("%d messages in 4 schema versions, all committed %.1f s after the start; the readers took %.1f s; %.1f s in all (Apicurio started in %.1f s, once for the package)",
		total, committed.Seconds(), time.Since(readStart).Seconds(), time.Since(began).Seconds(), registry.Started.Seconds())
}

// sparkRows is the rows of the Spark server's one result, in the
// statement's column order.
func sparkRows(out []byte) ([][]any, error) {
	for line := range strings.SplitSeq(string(out), "\n") {
		js, ok := strings.CutPrefix(line, "SPARKQ ")
		if !ok {
			continue
		}
		d := json.NewDecoder(strings.NewReader(js))
		d.UseNumber()
		var res struct {
			Rows []map[string]any `json:"rows"`
		}
		if err := d.Decode(&res); err != nil {
			return nil, fmt.Errorf("%w: %.300s", err, js)
		}
		rows := make([][]any, len(res.Rows))
		for i, m := range res.Rows {
			rows[i] = make([]any, len(evoColumns))
			for j, c := range evoColumns {
				rows[i][j] = m[c]
			}
		}
		return rows, nil
	}
	return nil, fmt.Errorf("no result: %.2000s", out)
}

// deadLetterRows counts the rows of a node's events_deadletter (-1: the
// query failed).
func deadLetterRows(t testing.TB, n *node) int {
	t.Helper()
	resp, err := http.Get(n.URL + "/v1/tables/events_deadletter/query?format=ndjson")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Logf("%s: events_deadletter: %s: %s", n.Name, resp.Status, b)
		return -1
	}
	return bytes.Count(b, []byte("\n"))
}
