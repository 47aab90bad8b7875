package trino_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/coltype"
	"github.com/sluicedb/sluice/internal/coldtest"
)

const nativeTablesYAML = `
tables:
  - name: kinds
    hashBy: n
    sortBy: ts
    schema:
      - {name: ts, type: timestamp}
      - {name: n, type: int64}
      - {name: d, type: date}
      - {name: tod, type: time_of_day}
      - {name: u, type: uuid}
      - {name: b, type: bytes}
      - {name: amount, type: "decimal(10,2)"}
      - {name: wide, type: "decimal(38,10)"}
`

// nativeRows is how many rows of every type the test writes; one more row
// (n = nativeRows) holds nulls in every native column.
const nativeRows = 300

// The native values of row n, each as its text in Trino (what CAST(... AS
// varchar) and to_base64 print), which is also the text the node takes.
func nativeDate(n int) string {
	return time.Date(1969, 12, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, n*7).Format(time.DateOnly) // some before 1970
}
func nativeTime(n int) string {
	us := (int64(n) * 287_654_321) % (24 * 3600 * 1_000_000)
	return time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(us) * time.Microsecond).Format("15:04:05.000000")
}
func nativeUUID(n int) string {
	return fmt.Sprintf("%08x-%04x-4abc-8def-%012x", n*2654435761%(1<<32), n, n*n*977) // differing first bytes: sign bits too
}
func nativeBytes(n int) []byte { return []byte{byte(n % 3), 0, 255, byte(n % 2)}[:n%5] } // a 0 and a 255: bytes, not text
func nativeAmount(n int) string {
	cents := n*13_579 - 1_000_000 // negatives, and values over a 32-bit unscaled range are not needed for p 10
	sign := ""
	if cents < 0 {
		sign, cents = "-", -cents
	}
	return fmt.Sprintf("%s%d.%02d", sign, cents/100, cents%100)
}

// nativeWide is row n's decimal(38,10): the largest 37-digit values both
// ways, zero, and values over both signs and 32 digits (Trino's long
// decimal, its Int128's high half set).
func nativeWide(n int) string {
	switch n % 50 {
	case 0:
		return "999999999999999999999999999.9999999999"
	case 1:
		return "-999999999999999999999999999.9999999999"
	case 2:
		return "0.0000000000"
	}
	u := new(big.Int).Mul(big.NewInt(int64(n)), big.NewInt(987654321987654321))
	u.Mul(u, big.NewInt(100_000_000_007))
	u.Sub(u, new(big.Int).Exp(big.NewInt(10), big.NewInt(31), nil))
	d, _ := coltype.DecimalOfBig(u, 10)
	return d.String()
}

func nativeRowJSON(n int) string {
	ts := at(n).Format(time.RFC3339Nano)
	if n == nativeRows {
		return fmt.Sprintf(`{"ts":%q,"n":%d}`, ts, n)
	}
	return fmt.Sprintf(`{"ts":%q,"n":%d,"d":%q,"tod":%q,"u":%q,"b":%q,"amount":%s,"wide":%s}`,
		ts, n, nativeDate(n), nativeTime(n), nativeUUID(n), base64.StdEncoding.EncodeToString(nativeBytes(n)), nativeAmount(n), nativeWide(n))
}

// TestTrinoNativeTypes: a table with date, time_of_day, uuid, bytes,
// decimal(10,2) and decimal(38,10) columns, ingested over HTTP into two
// nodes, reads through the connector (Arrow, the default, and NDJSON) as
// Trino's DATE, TIME(6), UUID, VARBINARY, DECIMAL(10,2) and DECIMAL(38,10)
// (a long decimal; the types Trino's Iceberg connector
// gives the Iceberg types sluice commits them as), every value as the test
// wrote it in its own row, and where clauses on them filter as Trino's own
// types compare.
func TestTrinoNativeTypes(t *testing.T) {
	coldtest.Require(t, coldtest.FindTrino())
	requirePlugin(t)
	nodes := startNodesWith(t, 2, nativeTablesYAML)
	for i, node := range nodes {
		var b strings.Builder
		for n := i; n <= nativeRows; n += len(nodes) {
			b.WriteString(nativeRowJSON(n) + "\n")
		}
		resp, err := http.Post(node+"/v1/tables/kinds/rows", "application/x-ndjson", strings.NewReader(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("ingest: %d %s", resp.StatusCode, body)
		}
	}

	trino := sharedTrino(t)
	for _, format := range []string{"arrow", "ndjson"} {
		t.Run("format="+format, func(t *testing.T) {
			cat := newCatalog(t, trino, "sluice", catalogFile(t, nodes[0])+"sluice.format="+format+"\n")
			tbl := cat + ".cluster.kinds"
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			query := func(sql string) [][]any {
				t.Helper()
				_, rows, err := trino.Query(ctx, sql)
				if err != nil {
					log, _ := os.ReadFile(trino.Log)
					t.Fatalf("%s: %v\nTrino log (end): %s", sql, err, log[max(0, len(log)-3000):])
				}
				return rows
			}

			wantTypes := map[string]string{"ts": "timestamp(6) with time zone", "n": "bigint", "d": "date", "tod": "time(6)",
				"u": "uuid", "b": "varbinary", "amount": "decimal(10,2)", "wide": "decimal(38,10)"}
			for _, r := range query("SELECT column_name, data_type FROM " + cat + ".information_schema.columns WHERE table_schema = 'cluster' AND table_name = 'kinds'") {
				name, typ := fmt.Sprint(r[0]), fmt.Sprint(r[1])
				if wantTypes[name] != typ {
					t.Errorf("column %s: type %s, want %s", name, typ, wantTypes[name])
				}
				delete(wantTypes, name)
			}
			if len(wantTypes) != 0 {
				t.Errorf("columns missing: %v", wantTypes)
			}

			rows := query("SELECT n, CAST(d AS varchar), CAST(tod AS varchar), CAST(u AS varchar), to_base64(b), CAST(amount AS varchar), CAST(wide AS varchar) FROM " + tbl + " ORDER BY n")
			if len(rows) != nativeRows+1 {
				t.Fatalf("%d rows, want %d", len(rows), nativeRows+1)
			}
			for n, r := range rows {
				got := fmt.Sprint(r)
				want := fmt.Sprint([]any{n, nativeDate(n), nativeTime(n), nativeUUID(n), base64.StdEncoding.EncodeToString(nativeBytes(n)), nativeAmount(n), nativeWide(n)})
				if n == nativeRows {
					want = fmt.Sprint([]any{n, nil, nil, nil, nil, nil, nil})
				}
				if got != want {
					t.Errorf("row %d: %v, want %v", n, got, want)
				}
			}

			// Where clauses compare Trino's values: counted here from what the
			// test wrote.
			var beforeEpoch, positive, afternoon, sameBytes, widePositive int
			for n := range nativeRows {
				if nativeDate(n) < "1970-01-01" {
					beforeEpoch++
				}
				if !strings.HasPrefix(nativeAmount(n), "-") && nativeAmount(n) != "0.00" {
					positive++
				}
				if !strings.HasPrefix(nativeWide(n), "-") && nativeWide(n) != "0.0000000000" {
					widePositive++
				}
				if string(nativeBytes(n)) == string(nativeBytes(9)) {
					sameBytes++
				}
				if nativeTime(n) >= "12:00:00" {
					afternoon++
				}
			}
			count := func(where string, want int) {
				t.Helper()
				if got := fmt.Sprint(query("SELECT count(*) FROM " + tbl + " WHERE " + where)[0][0]); got != fmt.Sprint(want) {
					t.Errorf("WHERE %s: %s rows, want %d", where, got, want)
				}
			}
			count("d < DATE '1970-01-01'", beforeEpoch)
			count(fmt.Sprintf("d = DATE '%s'", nativeDate(123)), 1)
			count("amount > 0", positive)
			count(fmt.Sprintf("amount = DECIMAL '%s'", nativeAmount(77)), 1)
			count("tod >= TIME '12:00:00.000000'", afternoon)
			count(fmt.Sprintf("u = UUID '%s'", nativeUUID(200)), 1)
			count(fmt.Sprintf("b = from_base64('%s')", base64.StdEncoding.EncodeToString(nativeBytes(9))), sameBytes)
			count("wide > 0", widePositive)
			count(fmt.Sprintf("wide = DECIMAL '%s'", nativeWide(77)), 1)
			count(fmt.Sprintf("wide = DECIMAL '%s'", nativeWide(1)), (nativeRows+49)/50)
			count("d IS NULL AND tod IS NULL AND u IS NULL AND b IS NULL AND amount IS NULL AND wide IS NULL", 1)
		})
	}
}

// nativeColdNodeYAML is a node committing the native table to the REST
// catalog's Iceberg table every 50 ms (the rows are days old, past the hot
// retention) and deleting them from its store.
func nativeColdNodeYAML(members []string, node, restURI, s3Endpoint string) string {
	return fmt.Sprintf(`
cluster: {members: [%s], node_timeout: 20s}
%s    compact:
      interval: 50ms
      after: 1h
      remove: true
      iceberg:
        warehouse: s3://%s/cluster
        s3: {endpoint: %q, region: %s, path_style: true}
        catalog: {type: rest, uri: %q}
        node: %s
        continuous: true
        orphan_interval: -1s
        maintain: {interval: -1s}
`, strings.Join(members, ", "), nativeTablesYAML, coldtest.Bucket, s3Endpoint, coldtest.Region, restURI, node)
}

// TestTrinoNativeTypesAsIceberg: the native columns sluice commits to
// Iceberg read through Trino's own Iceberg connector with the same Trino
// types the sluice connector gives them, so a join and a UNION ALL of the
// two catalogs' tables need no cast, and every row of the one matches its
// row of the other on every native column.
func TestTrinoNativeTypesAsIceberg(t *testing.T) {
	coldtest.Require(t, coldtest.FindTrino())
	requirePlugin(t)
	nodes, restURI := startColdNodesWith(t, 1, nativeColdNodeYAML)
	var b strings.Builder
	for n := 0; n <= nativeRows; n++ {
		b.WriteString(nativeRowJSON(n) + "\n")
	}
	resp, err := http.Post(nodes[0]+"/v1/tables/kinds/rows", "application/x-ndjson", strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("ingest: %d %s", resp.StatusCode, body)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for hotRowsOf(t, nodes[0], "kinds") > 0 {
		if time.Now().After(deadline) {
			t.Fatal("rows not committed to Iceberg after 2 minutes")
		}
		time.Sleep(100 * time.Millisecond)
	}

	trino := sharedTrino(t)
	sluiceCat := newCatalog(t, trino, "sluice", catalogFile(t, nodes[0]))
	icebergCat := newCatalog(t, trino, "iceberg", icebergCatalogFile(t, restURI, sharedS3(t).Endpoint))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	query := func(sql string) [][]any {
		t.Helper()
		_, rows, err := trino.Query(ctx, sql)
		if err != nil {
			log, _ := os.ReadFile(trino.Log)
			t.Fatalf("%s: %v\nTrino log (end): %s", sql, err, log[max(0, len(log)-3000):])
		}
		return rows
	}
	types := func(cat, schema string) map[string]string {
		out := map[string]string{}
		for _, r := range query(fmt.Sprintf("SELECT column_name, data_type FROM %s.information_schema.columns WHERE table_schema = '%s' AND table_name = 'kinds'", cat, schema)) {
			out[fmt.Sprint(r[0])] = fmt.Sprint(r[1])
		}
		return out
	}
	sluiceTypes, icebergTypes := types(sluiceCat, "cluster"), types(icebergCat, "sluice")
	for _, c := range []string{"ts", "n", "d", "tod", "u", "b", "amount", "wide"} {
		if sluiceTypes[c] == "" || sluiceTypes[c] != icebergTypes[c] {
			t.Errorf("column %s: %q through the sluice connector, %q through Iceberg's", c, sluiceTypes[c], icebergTypes[c])
		}
	}

	sluiceTbl, icebergTbl := sluiceCat+".cluster.kinds", icebergCat+".sluice.kinds"
	count := func(sql string, want int) {
		t.Helper()
		if got := fmt.Sprint(query(sql)[0][0]); got != fmt.Sprint(want) {
			t.Errorf("%s = %s, want %d", sql, got, want)
		}
	}
	count("SELECT count(*) FROM "+icebergTbl, nativeRows+1)
	count("SELECT count(*) FROM "+sluiceTbl+" s JOIN "+icebergTbl+" i ON s.n = i.n AND s.d = i.d AND s.tod = i.tod AND s.u = i.u AND s.b = i.b AND s.amount = i.amount AND s.wide = i.wide", nativeRows)
	count("SELECT count(*) FROM (SELECT d, tod, u, b, amount, wide FROM "+sluiceTbl+" UNION SELECT d, tod, u, b, amount, wide FROM "+icebergTbl+")", nativeRows+1)
}
