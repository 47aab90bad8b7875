// Command local starts, on one machine, the servers the cluster walkthrough
// (docs/cluster-walkthrough.md) runs sluice nodes beside: a single-node
// KRaft Kafka broker with the walkthrough's topic, versitygw as S3, an
// Iceberg REST catalog, and Trino with sluice's connector; and it produces sample rows and runs SQL
// on that Trino. Each server runs in the foreground until Ctrl-C.
//
// It starts them with the same code the tests start them with
// (internal/testkafka, internal/coldtest), from what scripts/install-kafka,
// scripts/install-s3, scripts/install-iceberg-rest, scripts/install-trino and
// scripts/build-trino-connector installed, so the steps a user takes and
// the steps the tests take cannot drift apart. The one difference is the
// ports: fixed here, where the example configs (examples/cluster/*.yaml)
// look for them, instead of free ones a test picks.
//
//	go run ./examples/cluster/local kafka     # broker on 127.0.0.1:9092, topic events (3 partitions)
//	go run ./examples/cluster/local produce   # 3000 rows keyed by user
//	go run ./examples/cluster/local s3        # versitygw on 127.0.0.1:7070, bucket warehouse
//	go run ./examples/cluster/local rest      # an Iceberg REST catalog on port 8181, its files on that S3
//	go run ./examples/cluster/local trino     # Trino on 127.0.0.1:8090 with examples/cluster/trino/*.properties
//	go run ./examples/cluster/local sql 'SELECT count(*) FROM sluice.cluster.events'
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/internal/coldtest"
	"github.com/sluicedb/sluice/internal/testkafka"
)

// The walkthrough's defaults: the example configs name these.
const (
	stateDir      = "/tmp/sluice-walkthrough"
	brokerPort    = 9092
	topic         = "events"
	partitions    = 3
	s3Addr        = "127.0.0.1:7070"
	s3AccessKey   = "walkthrough"
	s3SecretKey   = "walkthrough-secret"
	restPort      = 8181
	trinoPort     = 8090
	connectorPath = "connectors/trino/target/plugin/sluice"
)

// startTimeout bounds how long a server may take to start (Trino takes a
// minute or more on a busy 2-core machine).
const startTimeout = 5 * time.Minute

var commands = map[string]func(ctx context.Context, args []string) error{
	"kafka":   kafka,
	"produce": produce,
	"s3":      s3,
	"rest":    rest,
	"trino":   trino,
	"sql":     sql,
}

func main() {
	if len(os.Args) < 2 || commands[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, "usage: go run ./examples/cluster/local kafka|produce|s3|rest|trino|sql [flags] (docs/cluster-walkthrough.md)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := commands[os.Args[1]](ctx, os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "local %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

// kafka starts a broker on a fresh log directory, creates the topic and
// runs until interrupted. The directory is emptied first: a KRaft log
// directory is formatted once, for one cluster id.
func kafka(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("kafka", flag.ExitOnError)
	port := fs.Int("port", brokerPort, "the broker's port on 127.0.0.1")
	dir := fs.String("dir", filepath.Join(stateDir, "kafka"), "the broker's log directory (emptied first)")
	name := fs.String("topic", topic, "the topic to create")
	parts := fs.Int("partitions", partitions, "the topic's partitions")
	fs.Parse(args)
	if err := os.RemoveAll(*dir); err != nil {
		return err
	}
	startCtx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	broker, err := testkafka.StartWith(startCtx, *dir, testkafka.Options{Port: *port, Partitions: *parts})
	if err != nil {
		return fmt.Errorf("start the broker: %w", err)
	}
	defer broker.Stop()
	if err := createTopic(startCtx, broker.Addr, *name, *parts); err != nil {
		return err
	}
	fmt.Printf("kafka: ready on %s, topic %s (%d partitions); log %s; Ctrl-C stops it\n", broker.Addr, *name, *parts, filepath.Join(*dir, "broker.log"))
	<-ctx.Done()
	return nil
}

func createTopic(ctx context.Context, addr, name string, parts int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, int32(parts), 1, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", name, err)
	}
	return nil
}

// produce sends rows {"id", "user", "ts"} keyed by user with Kafka's
// default partitioner (murmur2 of the key), as the example configs'
// key_partitioned states.
func produce(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("produce", flag.ExitOnError)
	broker := fs.String("broker", "127.0.0.1:"+strconv.Itoa(brokerPort), "the broker")
	name := fs.String("topic", topic, "the topic")
	from := fs.Int("from", 0, "the first id")
	count := fs.Int("count", 3000, "how many rows")
	users := fs.Int("users", 20, "how many users the rows spread over")
	fs.Parse(args)
	cl, err := kgo.NewClient(kgo.SeedBrokers(*broker), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var records []*kgo.Record
	for id := *from; id < *from+*count; id++ {
		user := "u" + strconv.Itoa(id%*users)
		ts := start.Add(time.Duration(id) * time.Second).Format(time.RFC3339)
		records = append(records, &kgo.Record{Topic: *name, Key: []byte(user),
			Value: fmt.Appendf(nil, `{"id":%d,"user":%q,"ts":%q}`, id, user, ts)})
	}
	if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
		return fmt.Errorf("produce to %s: %w", *name, err)
	}
	fmt.Printf("produced %d rows (ids %d..%d) to %s\n", *count, *from, *from+*count-1, *name)
	return nil
}

// s3 runs versitygw with the bucket coldtest.Bucket ("warehouse") until
// interrupted. Its objects stay in the directory between starts.
func s3(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("s3", flag.ExitOnError)
	addr := fs.String("addr", s3Addr, "the S3 endpoint's address")
	dir := fs.String("dir", filepath.Join(stateDir, "s3"), "the directory behind the buckets")
	access := fs.String("access-key", s3AccessKey, "the root user's access key")
	secret := fs.String("secret-key", s3SecretKey, "the root user's secret key")
	fs.Parse(args)
	server, err := coldtest.StartS3With(*dir, coldtest.S3Options{Addr: *addr, AccessKey: *access, SecretKey: *secret})
	if err != nil {
		return fmt.Errorf("start versitygw: %w", err)
	}
	defer server.Stop()
	fmt.Printf("s3: ready on %s, bucket %s, objects under %s; Ctrl-C stops it\n", server.Endpoint, coldtest.Bucket, server.Root)
	<-ctx.Done()
	return nil
}

// rest runs Apache Iceberg's REST catalog server (the test fixture of
// Iceberg's own REST tests, on a SQLite file) until interrupted. It writes
// each commit's metadata file itself, so it is given the S3 endpoint and
// credentials the nodes use.
func rest(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("rest", flag.ExitOnError)
	port := fs.Int("port", restPort, "the catalog's port (it listens on every interface)")
	dir := fs.String("dir", filepath.Join(stateDir, "rest"), "the catalog's SQLite file and log")
	endpoint := fs.String("s3-endpoint", "http://"+s3Addr, "the S3 endpoint of the warehouse")
	access := fs.String("access-key", s3AccessKey, "the S3 access key")
	secret := fs.String("secret-key", s3SecretKey, "the S3 secret key")
	fs.Parse(args)
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	// The fixture reads catalog properties from CATALOG_ variables: "__"
	// is "-" and "_" is "." (CATALOG_S3_PATH__STYLE__ACCESS is
	// s3.path-style-access).
	server, err := coldtest.StartRESTOn(*port, *dir,
		"CATALOG_URI=jdbc:sqlite:file:"+filepath.Join(*dir, "rest-catalog.db"),
		"CATALOG_IO__IMPL=org.apache.iceberg.aws.s3.S3FileIO", "CATALOG_S3_ENDPOINT="+*endpoint,
		"CATALOG_S3_PATH__STYLE__ACCESS=true", "CATALOG_CLIENT_REGION="+coldtest.Region,
		"CATALOG_S3_ACCESS__KEY__ID="+*access, "CATALOG_S3_SECRET__ACCESS__KEY="+*secret)
	if err != nil {
		return fmt.Errorf("start the REST catalog: %w", err)
	}
	defer server.Stop()
	fmt.Printf("rest: ready on %s, files on %s; log %s; Ctrl-C stops it\n", server.URI, *endpoint, server.Log)
	<-ctx.Done()
	return nil
}

// trino runs Trino with sluice's connector and the catalog files given
// until interrupted.
func trino(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("trino", flag.ExitOnError)
	port := fs.Int("port", trinoPort, "Trino's HTTP port on 127.0.0.1")
	dir := fs.String("dir", filepath.Join(stateDir, "trino"), "Trino's configuration and state (emptied first)")
	plugin := fs.String("plugin", connectorPath, "the connector's plugin directory (scripts/build-trino-connector)")
	catalogGlob := fs.String("catalogs", "examples/cluster/trino/*.properties", "the catalog files; each file's name is its catalog's")
	fs.Parse(args)
	if _, err := os.Stat(filepath.Join(*plugin)); err != nil {
		return fmt.Errorf("the connector: %w (run scripts/build-trino-connector)", err)
	}
	files, err := filepath.Glob(*catalogGlob)
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no catalog files match %s: %v", *catalogGlob, err)
	}
	catalogs := map[string]string{}
	for _, f := range files {
		props, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		catalogs[strings.TrimSuffix(filepath.Base(f), ".properties")] = string(props)
	}
	if err := os.RemoveAll(*dir); err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	server, err := coldtest.StartTrinoOn(*port, *dir, catalogs, *plugin)
	if err != nil {
		return fmt.Errorf("start Trino: %w", err)
	}
	defer server.Stop()
	fmt.Printf("trino: ready on %s with the catalogs of %s; log %s; Ctrl-C stops it\n", server.URL, *catalogGlob, server.Log)
	<-ctx.Done()
	return nil
}

// sql runs one statement on the Trino that trino started and prints its
// rows, one a line, values separated by tabs.
func sql(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("sql", flag.ExitOnError)
	server := fs.String("server", "http://127.0.0.1:"+strconv.Itoa(trinoPort), "Trino's URL")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long the statement may take")
	fs.Parse(args)
	if fs.NArg() != 1 {
		return errors.New("give one SQL statement")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	_, rows, err := (&coldtest.Trino{URL: *server}).Query(ctx, fs.Arg(0))
	if err != nil {
		return err
	}
	for _, row := range rows {
		cells := make([]string, len(row))
		for i, v := range row {
			cells[i] = fmt.Sprint(v)
		}
		fmt.Println(strings.Join(cells, "\t"))
	}
	return nil
}
