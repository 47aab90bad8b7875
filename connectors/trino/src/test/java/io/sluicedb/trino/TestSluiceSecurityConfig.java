package io.sluicedb.trino;

import io.airlift.bootstrap.Bootstrap;
import io.airlift.configuration.ConfigPropertyMetadata;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;

import static io.airlift.configuration.testing.ConfigAssertions.assertFullMapping;
import static io.airlift.configuration.testing.ConfigAssertions.assertRecordedDefaults;
import static io.airlift.configuration.testing.ConfigAssertions.recordDefaults;
import static org.junit.jupiter.api.Assertions.assertEquals;

class TestSluiceSecurityConfig {
    @Test
    void defaults() {
        assertRecordedDefaults(recordDefaults(SluiceSecurityConfig.class)
                .setCaFile(null)
                .setCertFile(null)
                .setKeyFile(null)
                .setToken(null)
                .setTokenFile(null));
    }

    @Test
    void explicitPropertyMappings(@TempDir Path dir) throws Exception {
        // The files must exist: the mapping is validated, and a missing file is refused.
        Path ca = Files.createFile(dir.resolve("sluice-ca.pem"));
        Path cert = Files.createFile(dir.resolve("trino.pem"));
        Path key = Files.createFile(dir.resolve("trino.key"));
        Path token = Files.createFile(dir.resolve("sluice.token"));
        Map<String, String> properties = Map.of(
                "sluice.tls.ca-file", ca.toString(),
                "sluice.tls.cert-file", cert.toString(),
                "sluice.tls.key-file", key.toString(),
                "sluice.token", "s3cret",
                "sluice.token-file", token.toString());
        SluiceSecurityConfig expected = new SluiceSecurityConfig()
                .setCaFile(ca.toFile())
                .setCertFile(cert.toFile())
                .setKeyFile(key.toFile())
                .setToken("s3cret")
                .setTokenFile(token.toFile());
        assertFullMapping(properties, expected);
    }

    /** Airlift prints a catalog's properties at start-up; a security-sensitive one is printed as [REDACTED]. */
    @Test
    void tokenIsSecuritySensitive() {
        var properties = new Bootstrap(new SluiceModule()).setRequiredConfigurationProperties(Map.of("sluice.uri", "http://node-a:8080", "sluice.token", "s3cret")).configure();
        Map<String, Boolean> sensitive = new java.util.TreeMap<>();
        for (ConfigPropertyMetadata p : properties) {
            sensitive.put(p.name(), p.securitySensitive());
        }
        assertEquals(true, sensitive.get("sluice.token"), "sluice.token: " + sensitive);
        assertEquals(false, sensitive.get("sluice.uri"), "sluice.uri: " + sensitive);
    }
}
