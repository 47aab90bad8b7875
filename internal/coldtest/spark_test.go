package coldtest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testenv"
)

// TestSparkServerSessions: one Spark JVM answers request after request,
// each in a session of its own: a setting one request's file makes is
// not seen by the next, a statement that fails is reported as
// ErrSparkStatement with Spark's message and the server answers the next
// request, and a request past its context's deadline returns at the
// deadline (the JVM killed), not when Spark is done.
func TestSparkServerSessions(t *testing.T) {
	if testenv.RaceEnabled {
		// A Spark JVM's start is tens of CPU-seconds; what this checks is
		// the JVM's side of the protocol, not a race.
		t.Skip("scripts/test runs this test without -race, beside the engine tests")
	}
	t.Parallel()
	spark, err := FindSpark()
	Require(t, err)
	srv := spark.Server()
	defer srv.Close()
	dir := t.TempDir()
	withPartitions := filepath.Join(dir, "seven.conf")
	plain := filepath.Join(dir, "plain.conf")
	if err := os.WriteFile(withPartitions, []byte("# a comment\nspark.sql.shuffle.partitions 7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plain, []byte("spark.sql.extensions org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	partitions := func(conf string) string {
		t.Helper()
		out, err := srv.Run(ctx, conf, "SELECT 1 AS one", "SET spark.sql.shuffle.partitions")
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != 2 || !strings.Contains(lines[0], `"rows":[{"one":1}]`) {
			t.Fatalf("want two SPARKQ lines, the first with one=1: %s", out)
		}
		return lines[1]
	}
	if got := partitions(withPartitions); !strings.Contains(got, `"value":"7"`) {
		t.Errorf("the first request's own setting: %s, want value 7", got)
	}
	if got := partitions(plain); !strings.Contains(got, `"value":"2"`) {
		t.Errorf("the next request saw the first one's setting: %s, want the server's value 2", got)
	}
	if _, err := srv.Run(ctx, plain, "SELECT * FROM no_such_table"); !errors.Is(err, ErrSparkStatement) || !strings.Contains(err.Error(), "no_such_table") {
		t.Errorf("a failing statement: %v, want ErrSparkStatement naming the table", err)
	}
	if got := partitions(plain); !strings.Contains(got, `"value":"2"`) {
		t.Errorf("after a failed statement: %s", got)
	}
	short, cancelShort := context.WithTimeout(ctx, 3*time.Second)
	defer cancelShort()
	begin := time.Now()
	if _, err := srv.Run(short, plain, "SELECT count(*) FROM range(1000000000000)"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a statement past its deadline: %v, want context.DeadlineExceeded", err)
	}
	if took := time.Since(begin); took > 30*time.Second {
		t.Errorf("a statement past its 3 s deadline returned after %v", took)
	}
}
