package io.sluicedb.trino;

import io.airlift.units.Duration;
import io.trino.spi.ErrorType;
import io.trino.spi.TrinoException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.function.Executable;
import org.junit.jupiter.api.io.TempDir;

import java.net.ServerSocket;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static io.sluicedb.trino.SluiceErrorCode.SLUICE_ACCESS_DENIED;
import static io.sluicedb.trino.SluiceErrorCode.SLUICE_BAD_ANSWER;
import static io.sluicedb.trino.SluiceErrorCode.SLUICE_LEASE_EXPIRED;
import static io.sluicedb.trino.SluiceErrorCode.SLUICE_NODE_ERROR;
import static io.sluicedb.trino.SluiceErrorCode.SLUICE_TOKEN_UNREADABLE;
import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The client against stand-in nodes: the error code each failure gets, the token it sends, and TLS both ways. */
@Timeout(60)
class TestSluiceClient {
    private static final String TABLES = "{\"tables\":[{\"name\":\"events\"}]}";

    @TempDir
    Path dir;

    private static SluiceClient client(String uri, SluiceSecurityConfig security) {
        return new SluiceClient(new SluiceConfig().setUri(URI.create(uri)).setNodeTimeout(new Duration(5, SECONDS)), security);
    }

    private static TrinoException fails(SluiceErrorCode want, Executable call) {
        TrinoException e = assertThrows(TrinoException.class, call);
        assertEquals(want.toErrorCode(), e.getErrorCode(), e.getMessage());
        assertEquals(ErrorType.EXTERNAL, e.getErrorCode().getType());
        return e;
    }

    @Test
    void nodeFailureIsNodeError() throws Exception {
        try (TestingNode node = TestingNode.http().route("GET", "/v1/tables", new TestingNode.Answer(500, "{\"error\":\"disk full\"}"));
                SluiceClient c = client(node.uri(), new SluiceSecurityConfig())) {
            TrinoException e = fails(SLUICE_NODE_ERROR, c::tableNames);
            assertTrue(e.getMessage().contains("500") && e.getMessage().contains("disk full"), e.getMessage());
        }
    }

    @Test
    void unreachableNodeIsNodeError() throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            port = s.getLocalPort();
        }
        try (SluiceClient c = client("http://127.0.0.1:" + port, new SluiceSecurityConfig())) {
            fails(SLUICE_NODE_ERROR, c::tableNames);
        }
    }

    @Test
    void endedLeaseIsLeaseExpired() throws Exception {
        try (TestingNode node = TestingNode.http()
                .route("POST", "/v1/tables/events/leases/L1/splits", new TestingNode.Answer(410, "{\"error\":\"lease L1 on events is gone\"}"))
                .route("GET", "/v1/tables/events/query", new TestingNode.Answer(410, "{\"error\":\"lease L1 on events is gone\"}"));
                SluiceClient c = client(node.uri(), new SluiceSecurityConfig())) {
            fails(SLUICE_LEASE_EXPIRED, () -> c.reuseLease("events", "L1"));
            fails(SLUICE_LEASE_EXPIRED, () -> c.query(node.uri(), "events", "hot", "L1", SluiceConfig.Format.ARROW, List.of("ts"), null, null, List.of()));
        }
    }

    @Test
    void notJsonIsBadAnswer() throws Exception {
        try (TestingNode node = TestingNode.http().route("GET", "/v1/tables", new TestingNode.Answer(200, "<html>a proxy's page</html>"));
                SluiceClient c = client(node.uri(), new SluiceSecurityConfig())) {
            fails(SLUICE_BAD_ANSWER, c::tableNames);
        }
    }

    @Test
    void sendsTokenAsBearer() throws Exception {
        try (TestingNode node = TestingNode.http().route("GET", "/v1/tables", TestingNode.Answer.json(TABLES));
                SluiceClient c = client(node.uri(), new SluiceSecurityConfig().setToken("t0ken"))) {
            assertEquals(List.of("events"), c.tableNames());
            assertEquals("Bearer t0ken", node.requests().getFirst().authorization());
        }
    }

    @Test
    void noTokenNoHeader() throws Exception {
        try (TestingNode node = TestingNode.http().route("GET", "/v1/tables", TestingNode.Answer.json(TABLES));
                SluiceClient c = client(node.uri(), new SluiceSecurityConfig())) {
            c.tableNames();
            assertEquals(null, node.requests().getFirst().authorization());
        }
    }

    /** A node (or a proxy before it) that echoes the Authorization header must not put the token in Trino's error. */
    @Test
    void refusedTokenIsAccessDeniedAndNotEchoed() throws Exception {
        try (TestingNode node = TestingNode.http()
                .route("GET", "/v1/tables", r -> new TestingNode.Answer(401, "{\"error\":\"bad credentials: " + r.authorization() + "\"}"))
                .route("GET", "/v1/tables/events", new TestingNode.Answer(403, "{\"error\":\"missing permission query on events\"}"));
                SluiceClient c = client(node.uri(), new SluiceSecurityConfig().setToken("hunter2-secret"))) {
            TrinoException e = fails(SLUICE_ACCESS_DENIED, c::tableNames);
            assertFalse(e.getMessage().contains("hunter2-secret"), e.getMessage());
            assertTrue(e.getMessage().contains("Bearer [token]"), e.getMessage());
            fails(SLUICE_ACCESS_DENIED, () -> c.table("events"));
        }
    }

    @Test
    void tokenFileIsReadForEachRequest() throws Exception {
        Path file = Files.writeString(dir.resolve("token"), "one\n");
        try (TestingNode node = TestingNode.http().route("GET", "/v1/tables", TestingNode.Answer.json(TABLES));
                SluiceClient c = client(node.uri(), new SluiceSecurityConfig().setTokenFile(file.toFile()))) {
            c.tableNames();
            Files.writeString(file, "two");
            c.tableNames();
            assertEquals(List.of("Bearer one", "Bearer two"), node.requests().stream().map(TestingNode.Request::authorization).toList());
            Files.delete(file);
            TrinoException e = fails(SLUICE_TOKEN_UNREADABLE, c::tableNames);
            assertFalse(e.getMessage().contains("two"), e.getMessage());
        }
    }

    @Test
    void httpsVerifiedAgainstCaFile() throws Exception {
        TestingCertificates certs = TestingCertificates.create(dir, "node");
        try (TestingNode node = TestingNode.https(certs, "node", null).route("GET", "/v1/tables", TestingNode.Answer.json(TABLES));
                SluiceClient c = client(node.uri(), new SluiceSecurityConfig().setCaFile(certs.certFile("node").toFile()).setToken("t0ken"))) {
            assertEquals(List.of("events"), c.tableNames());
            assertEquals("Bearer t0ken", node.requests().getFirst().authorization());
        }
    }

    @Test
    void httpsRefusesUnknownCa() throws Exception {
        TestingCertificates certs = TestingCertificates.create(dir, "node", "other");
        try (TestingNode node = TestingNode.https(certs, "node", null).route("GET", "/v1/tables", TestingNode.Answer.json(TABLES))) {
            // The JVM's own trust store does not know the node's CA, and neither does another CA's file.
            try (SluiceClient c = client(node.uri(), new SluiceSecurityConfig())) {
                fails(SLUICE_NODE_ERROR, c::tableNames);
            }
            try (SluiceClient c = client(node.uri(), new SluiceSecurityConfig().setCaFile(certs.certFile("other").toFile()))) {
                fails(SLUICE_NODE_ERROR, c::tableNames);
            }
            assertEquals(List.of(), node.requests(), "a request reached a node the client should not trust");
        }
    }

    @Test
    void clientCertificate() throws Exception {
        TestingCertificates certs = TestingCertificates.create(dir, "node", "client", "stranger");
        try (TestingNode node = TestingNode.https(certs, "node", "client").route("GET", "/v1/tables", TestingNode.Answer.json(TABLES))) {
            SluiceSecurityConfig trustNode = new SluiceSecurityConfig().setCaFile(certs.certFile("node").toFile());
            try (SluiceClient c = client(node.uri(), trustNode)) {
                fails(SLUICE_NODE_ERROR, c::tableNames);
            }
            try (SluiceClient c = client(node.uri(), new SluiceSecurityConfig().setCaFile(certs.certFile("node").toFile())
                    .setCertFile(certs.certFile("stranger").toFile()).setKeyFile(certs.keyFile("stranger").toFile()))) {
                fails(SLUICE_NODE_ERROR, c::tableNames);
            }
            assertEquals(List.of(), node.requests());
            try (SluiceClient c = client(node.uri(), new SluiceSecurityConfig().setCaFile(certs.certFile("node").toFile())
                    .setCertFile(certs.certFile("client").toFile()).setKeyFile(certs.keyFile("client").toFile()))) {
                assertEquals(List.of("events"), c.tableNames());
            }
        }
    }
}
