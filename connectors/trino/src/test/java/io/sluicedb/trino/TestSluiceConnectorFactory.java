package io.sluicedb.trino;

import io.trino.spi.connector.Connector;
import io.trino.spi.connector.ConnectorContext;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The catalog file as Trino hands it to the plugin: mapped, validated, and refused with a message that says why. */
class TestSluiceConnectorFactory {
    private static final ConnectorContext CONTEXT = new ConnectorContext() {};

    @TempDir
    Path dir;

    @Test
    void createsFromTrinoDurations() {
        Connector c = new SluiceConnectorFactory().create("sluice", Map.of(
                "sluice.uri", "http://127.0.0.1:1",
                "sluice.lease-ttl", "1h",
                "sluice.node-timeout", "1.5s",
                "sluice.format", "NDJSON"), CONTEXT);
        c.shutdown();
    }

    @Test
    void createsWithTls() throws Exception {
        TestingCertificates certs = TestingCertificates.create(dir, "node", "client");
        Path token = Files.writeString(dir.resolve("token"), "t0ken\n");
        Connector c = new SluiceConnectorFactory().create("sluice", Map.of(
                "sluice.uri", "https://127.0.0.1:1",
                "sluice.tls.ca-file", certs.certFile("node").toString(),
                "sluice.tls.cert-file", certs.certFile("client").toString(),
                "sluice.tls.key-file", certs.keyFile("client").toString(),
                "sluice.token-file", token.toString()), CONTEXT);
        c.shutdown();
    }

    @Test
    void refusesUnknownProperty() {
        refused(Map.of("sluice.uri", "http://node-a:8080", "sluice.lease_ttl", "5m"), "sluice.lease_ttl");
    }

    @Test
    void refusesMissingUri() {
        refused(Map.of(), "sluice.uri");
    }

    @Test
    void refusesUriWithoutHttp() {
        refused(Map.of("sluice.uri", "node-a:8080"), "http:// or https://");
    }

    @Test
    void refusesLeaseOverAnHour() {
        refused(Map.of("sluice.uri", "http://node-a:8080", "sluice.lease-ttl", "2h"), "leaseTtl");
    }

    @Test
    void refusesBadDuration() {
        refused(Map.of("sluice.uri", "http://node-a:8080", "sluice.node-timeout", "30"), "sluice.node-timeout");
    }

    @Test
    void refusesCertificateWithoutKey() throws Exception {
        TestingCertificates certs = TestingCertificates.create(dir, "client");
        refused(Map.of("sluice.uri", "https://node-a:8443", "sluice.tls.cert-file", certs.certFile("client").toString()), "set both or neither");
    }

    @Test
    void refusesMissingCaFile() {
        refused(Map.of("sluice.uri", "https://node-a:8443", "sluice.tls.ca-file", dir.resolve("nope.pem").toString()), "nope.pem");
    }

    @Test
    void refusesTwoTokens() throws Exception {
        Path token = Files.writeString(dir.resolve("token"), "t0ken");
        refused(Map.of("sluice.uri", "http://node-a:8080", "sluice.token", "t0ken", "sluice.token-file", token.toString()), "not both");
    }

    /** A refused catalog must not print its token back, whatever else is wrong with it. */
    @Test
    void refusalDoesNotEchoToken() {
        Map<String, String> props = new HashMap<>(Map.of("sluice.uri", "http://node-a:8080", "sluice.token", "hunter2-secret", "sluice.lease-ttl", "2h"));
        String message = refused(props, "leaseTtl");
        assertTrue(!message.contains("hunter2-secret"), message);
    }

    private static String refused(Map<String, String> properties, String want) {
        RuntimeException e = assertThrows(RuntimeException.class, () -> new SluiceConnectorFactory().create("sluice", properties, CONTEXT));
        assertTrue(e.getMessage().contains(want), "want " + want + " in: " + e.getMessage());
        return e.getMessage();
    }
}
