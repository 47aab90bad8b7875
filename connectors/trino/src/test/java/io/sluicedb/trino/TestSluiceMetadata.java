package io.sluicedb.trino;

import io.trino.spi.connector.Connector;
import io.trino.spi.connector.ConnectorContext;
import io.trino.spi.connector.ConnectorMetadata;
import io.trino.spi.connector.ConnectorSession;
import io.trino.spi.connector.ConnectorTableHandle;
import io.trino.spi.connector.ConnectorTransactionHandle;
import io.trino.spi.connector.SchemaTableName;
import io.trino.spi.transaction.IsolationLevel;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.List;
import java.util.Map;
import java.util.Optional;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

/** The metadata a statement sees, through a connector made as Trino makes it, against a node that counts requests. */
@Timeout(60)
class TestSluiceMetadata {
    private static final String EVENTS = """
            {"name":"events","hashBy":"user","sortBy":"ts","schema":[
              {"name":"ts","type":"timestamp"},{"name":"user","type":"string"},{"name":"n","type":"int64"},
              {"name":"x","type":"float64"},{"name":"ok","type":"bool"}]}""";
    // The metadata calls made here do not look at the session; cleanupQuery, which does, is not called.
    private static final ConnectorSession SESSION = null;

    private TestingNode node;
    private Connector connector;

    @BeforeEach
    void start() throws Exception {
        node = TestingNode.http()
                .route("GET", "/v1/tables", TestingNode.Answer.json("{\"tables\":[{\"name\":\"events\"}]}"))
                .route("GET", "/v1/tables/events", TestingNode.Answer.json(EVENTS));
        connector = new SluiceConnectorFactory().create("sluice", Map.of("sluice.uri", node.uri(), "sluice.node-timeout", "5s"), new ConnectorContext() {});
    }

    @AfterEach
    void stop() {
        connector.shutdown();
        node.close();
    }

    @Test
    void asksTheNodeOncePerTransaction() {
        ConnectorTransactionHandle tx = connector.beginTransaction(IsolationLevel.READ_COMMITTED, true, true);
        ConnectorMetadata m = connector.getMetadata(SESSION, tx);
        for (int i = 0; i < 3; i++) {
            // What Trino asks while it plans SELECT ... FROM sluice.cluster.events, and for information_schema.
            ConnectorTableHandle h = m.getTableHandle(SESSION, new SchemaTableName("cluster", "events"), Optional.empty(), Optional.empty());
            assertNotNull(h);
            assertEquals(List.of("ts", "user", "n", "x", "ok"), List.copyOf(m.getColumnHandles(SESSION, h).keySet()));
            assertEquals(5, m.getTableMetadata(SESSION, h).getColumns().size());
            assertEquals(List.of(new SchemaTableName("cluster", "events")), m.listTables(SESSION, Optional.empty()));
            assertNull(m.getTableHandle(SESSION, new SchemaTableName("cluster", "nope"), Optional.empty(), Optional.empty()));
        }
        assertEquals(1, node.count("GET", "/v1/tables/events"), "requests: " + node.requests());
        assertEquals(1, node.count("GET", "/v1/tables"), "requests: " + node.requests());
        assertEquals(1, node.count("GET", "/v1/tables/nope"), "requests: " + node.requests());

        // The next statement sees the node's tables as they are then.
        connector.commit(tx);
        assertThrows(IllegalStateException.class, () -> connector.getMetadata(SESSION, tx));
        ConnectorTransactionHandle next = connector.beginTransaction(IsolationLevel.READ_COMMITTED, true, true);
        ConnectorMetadata m2 = connector.getMetadata(SESSION, next);
        assertNotNull(m2.getTableHandle(SESSION, new SchemaTableName("cluster", "events"), Optional.empty(), Optional.empty()));
        assertEquals(2, node.count("GET", "/v1/tables/events"), "requests: " + node.requests());
        connector.rollback(next);
    }

    @Test
    void transactionsDoNotShareMetadata() {
        ConnectorTransactionHandle a = connector.beginTransaction(IsolationLevel.READ_COMMITTED, true, true);
        ConnectorTransactionHandle b = connector.beginTransaction(IsolationLevel.READ_COMMITTED, true, true);
        connector.getMetadata(SESSION, a).listTables(SESSION, Optional.of("cluster"));
        connector.getMetadata(SESSION, b).listTables(SESSION, Optional.of("cluster"));
        assertEquals(2, node.count("GET", "/v1/tables"), "requests: " + node.requests());
        connector.commit(a);
        connector.commit(b);
    }
}
