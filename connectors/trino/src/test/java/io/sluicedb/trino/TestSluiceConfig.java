package io.sluicedb.trino;

import io.airlift.units.Duration;
import org.junit.jupiter.api.Test;

import java.net.URI;
import java.util.Map;

import static io.airlift.configuration.testing.ConfigAssertions.assertFullMapping;
import static io.airlift.configuration.testing.ConfigAssertions.assertRecordedDefaults;
import static io.airlift.configuration.testing.ConfigAssertions.recordDefaults;
import static java.util.concurrent.TimeUnit.HOURS;
import static java.util.concurrent.TimeUnit.MINUTES;
import static java.util.concurrent.TimeUnit.SECONDS;

class TestSluiceConfig {
    @Test
    void defaults() {
        assertRecordedDefaults(recordDefaults(SluiceConfig.class)
                .setUri(null)
                .setNodeTimeout(new Duration(30, SECONDS))
                .setLeaseTtl(new Duration(5, MINUTES))
                .setFormat(SluiceConfig.Format.ARROW));
    }

    @Test
    void explicitPropertyMappings() {
        // 1h and 1.5s are what the hand-written parser this replaced refused.
        Map<String, String> properties = Map.of(
                "sluice.uri", "https://node-a:8443",
                "sluice.node-timeout", "1.5s",
                "sluice.lease-ttl", "1h",
                "sluice.format", "ndjson");
        SluiceConfig expected = new SluiceConfig()
                .setUri(URI.create("https://node-a:8443"))
                .setNodeTimeout(new Duration(1.5, SECONDS))
                .setLeaseTtl(new Duration(1, HOURS))
                .setFormat(SluiceConfig.Format.NDJSON);
        assertFullMapping(properties, expected);
    }
}
