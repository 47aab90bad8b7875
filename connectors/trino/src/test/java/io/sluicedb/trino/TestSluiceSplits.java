package io.sluicedb.trino;

import io.trino.spi.connector.ColumnHandle;
import io.trino.spi.connector.Connector;
import io.trino.spi.connector.ConnectorContext;
import io.trino.spi.connector.ConnectorPageSource;
import io.trino.spi.connector.ConnectorSession;
import io.trino.spi.connector.ConnectorSplit;
import io.trino.spi.connector.ConnectorSplitSource;
import io.trino.spi.connector.ConnectorTableHandle;
import io.trino.spi.connector.ConnectorTransactionHandle;
import io.trino.spi.connector.Constraint;
import io.trino.spi.connector.DynamicFilter;
import io.trino.spi.connector.SchemaTableName;
import io.trino.spi.transaction.IsolationLevel;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The splits a statement gets from a lease's answer, and how each is read: an append-only table's one split per node
 * in the catalog's format, a keyed table's one split (tier "cluster", on the node that opened the lease, every node's
 * part merged by key there) as NDJSON whatever the catalog's format.
 */
@Timeout(60)
class TestSluiceSplits {
    private static final String EVENTS = """
            {"name":"events","hashBy":"user","sortBy":"ts","schema":[
              {"name":"ts","type":"timestamp"},{"name":"user","type":"string"},{"name":"n","type":"int64"}]}""";
    // The split manager asks the session for its query only: the key of the statement's leases.
    private static final ConnectorSession SESSION = (ConnectorSession) Proxy.newProxyInstance(
            TestSluiceSplits.class.getClassLoader(), new Class<?>[] {ConnectorSession.class},
            (proxy, method, args) -> method.getName().equals("getQueryId") ? "q1" : null);

    private TestingNode node;
    private Connector connector;

    @AfterEach
    void stop() {
        if (connector != null) {
            connector.shutdown();
        }
        if (node != null) {
            node.close();
        }
    }

    private List<SluiceSplit> splits(String lease) throws Exception {
        node = TestingNode.http()
                .route("GET", "/v1/tables", TestingNode.Answer.json("{\"tables\":[{\"name\":\"events\"}]}"))
                .route("GET", "/v1/tables/events", TestingNode.Answer.json(EVENTS))
                .route("POST", "/v1/tables/events/leases", TestingNode.Answer.json(lease))
                .route("POST", "/v1/tables/events/leases/L1/done", new TestingNode.Answer(204, ""))
                .route("GET", "/v1/tables/events/query", TestingNode.Answer.json(
                        "{\"ts\":\"2026-11-29T10:00:00Z\",\"user\":\"u1\",\"n\":1}\n"));
        connector = new SluiceConnectorFactory().create("sluice", Map.of("sluice.uri", node.uri(), "sluice.node-timeout", "5s", "sluice.format", "ARROW"),
                new ConnectorContext() {});
        ConnectorSplitSource source = connector.getSplitManager().getSplits(transaction(), SESSION, table(), DynamicFilter.EMPTY, Constraint.alwaysTrue());
        List<SluiceSplit> out = new ArrayList<>();
        while (!source.isFinished()) {
            for (ConnectorSplit s : source.getNextBatch(100).get().getSplits()) {
                out.add((SluiceSplit) s);
            }
        }
        return out;
    }

    private ConnectorTransactionHandle tx;

    private ConnectorTransactionHandle transaction() {
        if (tx == null) {
            tx = connector.beginTransaction(IsolationLevel.READ_COMMITTED, true, true);
        }
        return tx;
    }

    private ConnectorTableHandle table() {
        return connector.getMetadata(SESSION, transaction()).getTableHandle(SESSION, new SchemaTableName("cluster", "events"), Optional.empty(), Optional.empty());
    }

    @Test
    void appendOnlyTableHasOneSplitPerNode() throws Exception {
        List<SluiceSplit> got = splits("""
                {"id":"L1","ttl":"5m","splits":[{"node":"http://a:1","tier":"all"},{"node":"http://b:2","tier":"hot"}]}""");
        assertEquals(List.of(new SluiceSplit("http://a:1", "all", "L1"), new SluiceSplit("http://b:2", "hot", "L1")), got);
        assertFalse(got.get(0).merged() || got.get(1).merged());
    }

    @Test
    void keyedTableHasOneMergedSplitReadAsNdjson() throws Exception {
        List<SluiceSplit> got = splits("""
                {"id":"L1","ttl":"5m","splits":[{"node":"","tier":"cluster"}]}""");
        assertEquals(List.of(new SluiceSplit(node.uri(), "cluster", "L1")), got);
        assertTrue(got.get(0).merged());
        Map<String, ColumnHandle> cols = connector.getMetadata(SESSION, transaction()).getColumnHandles(SESSION, table());
        try (ConnectorPageSource ps = connector.getPageSourceProvider().createPageSource(transaction(), SESSION, got.get(0), table(),
                List.of(cols.get("n")), DynamicFilter.EMPTY)) {
            List<TestingNode.Request> queries = node.requests().stream().filter(r -> r.path().equals("/v1/tables/events/query")).toList();
            assertEquals(1, queries.size(), node.requests().toString());
            String q = queries.get(0).query();
            // The catalog's format is ARROW: the merged split is still asked for NDJSON, the only format the merge answers.
            assertTrue(q.contains("format=ndjson") && q.contains("tier=cluster") && q.contains("lease=L1"), q);
            while (!ps.isFinished()) {
                ps.getNextSourcePage();
            }
        }
        assertEquals(1, node.count("POST", "/v1/tables/events/leases/L1/done"));
    }
}
