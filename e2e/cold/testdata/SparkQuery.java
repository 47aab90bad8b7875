// SparkQuery runs Spark SQL statements in one local Spark session and prints
// each result as one line of JSON on standard output:
//
//	SPARKQ {"schema": <the result's Spark schema as JSON>, "rows": [<each row as Spark's toJSON writes it>]}
//
// args[0] is a Spark properties file in spark-defaults.conf form ("key value"
// per line, '#' comments): the catalog configuration a user writes, which the
// test takes from docs/cold-tier.md. args[1..] are the statements. The
// session settings below are the harness's (one local JVM, no UI, UTC, nulls
// kept in the JSON), not part of the documented configuration.
//
// It runs as a Java source file (java ... SparkQuery.java), so there is no
// build step: scripts/install-spark resolves the classpath.

import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.List;

import org.apache.spark.SparkConf;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;

public class SparkQuery {
  public static void main(String[] args) throws Exception {
    SparkConf conf = new SparkConf(false)
        .setMaster("local[2]")
        .setAppName("sluice-cold-tier-test")
        .set("spark.ui.enabled", "false")
        .set("spark.driver.host", "127.0.0.1")
        .set("spark.driver.bindAddress", "127.0.0.1")
        .set("spark.sql.shuffle.partitions", "2")
        .set("spark.sql.session.timeZone", "UTC")
        .set("spark.sql.jsonGenerator.ignoreNullFields", "false");
    for (String line : Files.readAllLines(Paths.get(args[0]))) {
      line = line.trim();
      if (line.isEmpty() || line.startsWith("#")) {
        continue;
      }
      String[] kv = line.split("\\s+", 2);
      conf.set(kv[0], kv.length > 1 ? kv[1].trim() : "");
    }
    SparkSession spark = SparkSession.builder().config(conf).getOrCreate();
    try {
      for (int i = 1; i < args.length; i++) {
        Dataset<Row> df = spark.sql(args[i]);
        List<String> rows = df.toJSON().collectAsList();
        System.out.println("SPARKQ {\"schema\":" + df.schema().json() + ",\"rows\":[" + String.join(",", rows) + "]}");
        System.out.flush();
      }
    } finally {
      spark.stop();
    }
  }
}
