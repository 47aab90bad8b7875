// SparkServer is one local Spark session that answers many requests, so
// that a test package pays for one Spark start (tens of CPU-seconds)
// instead of one per query. It reads one request a line on standard input,
//
//	{"conf": "<a Spark properties file in spark-defaults.conf form>", "statements": ["...", ...]}
//
// and runs the statements, in order, in a new session of the one Spark
// context (SparkSession.newSession: its own SQL settings and catalogs, so
// two tests' catalogs named alike do not meet) with the file's settings.
// It answers each statement with one line
//
//	SPARKQ {"schema": <the result's Spark schema as JSON>, "rows": [<each row as Spark's toJSON writes it>]}
//
// or, at the first statement that fails,
// SPARKERR followed by the error as a JSON string; then SPARKEND. The
// session settings below are the harness's (one local JVM, no UI, UTC,
// nulls kept in the JSON, Iceberg's SQL extensions: a static setting, so
// every request shares it; the session catalog's warehouse in args[0], a
// directory of the test's), not part of a documented configuration.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.List;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.spark.SparkConf;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;

public class SparkServer {
  public static void main(String[] args) throws Exception {
    // The replies go to a copy of standard output; System.out then points
    // at standard error, so that a library printing to it cannot break
    // the framing.
    PrintStream replies = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, StandardCharsets.UTF_8);
    System.setOut(System.err);
    SparkConf conf = new SparkConf(false)
        .setMaster("local[2]")
        .setAppName("sluice-test-spark-server")
        .set("spark.ui.enabled", "false")
        .set("spark.driver.host", "127.0.0.1")
        .set("spark.driver.bindAddress", "127.0.0.1")
        .set("spark.sql.shuffle.partitions", "2")
        .set("spark.sql.session.timeZone", "UTC")
        .set("spark.sql.jsonGenerator.ignoreNullFields", "false")
        .set("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        .set("spark.sql.warehouse.dir", args[0]);
    SparkSession base = SparkSession.builder().config(conf).getOrCreate();
    ObjectMapper json = new ObjectMapper();
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    replies.println("SPARKREADY");
    for (String line; (line = in.readLine()) != null; ) {
      if (line.isBlank()) {
        continue;
      }
      try {
        JsonNode req = json.readTree(line);
        SparkSession spark = base.newSession();
        for (String l : Files.readAllLines(Paths.get(req.get("conf").asText()))) {
          l = l.trim();
          if (l.isEmpty() || l.startsWith("#")) {
            continue;
          }
          String[] kv = l.split("\\s+", 2);
          String v = kv.length > 1 ? kv[1].trim() : "";
          if (v.equals(base.conf().get(kv[0], null))) {
            continue; // a static setting the server already has
          }
          spark.conf().set(kv[0], v);
        }
        for (JsonNode stmt : req.get("statements")) {
          Dataset<Row> df = spark.sql(stmt.asText());
          List<String> rows = df.toJSON().collectAsList();
          replies.println("SPARKQ {\"schema\":" + df.schema().json() + ",\"rows\":[" + String.join(",", rows) + "]}");
        }
      } catch (Exception e) {
        e.printStackTrace();
        replies.println("SPARKERR " + json.writeValueAsString(String.valueOf(e)));
      }
      replies.println("SPARKEND");
    }
    base.stop();
  }
}
