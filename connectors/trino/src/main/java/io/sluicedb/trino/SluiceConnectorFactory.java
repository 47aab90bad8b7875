package io.sluicedb.trino;

import io.trino.spi.connector.Connector;
import io.trino.spi.connector.ConnectorContext;
import io.trino.spi.connector.ConnectorFactory;

import java.net.URI;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;

/**
 * Makes a catalog from its properties file:
 * <pre>
 * connector.name=sluice
 * sluice.uri=http://node-a:8080     # any node; it names the others (GET /v1/cluster)
 * sluice.node-timeout=30s           # optional: connecting to a node and each wait for more of its answer
 * sluice.lease-ttl=5m               # optional: how long a query's splits may take to be read (docs/cluster.md)
 * sluice.format=arrow               # optional: arrow (sluice-full's nodes) or ndjson (the lean sluice binary)
 * </pre>
 */
public final class SluiceConnectorFactory implements ConnectorFactory {
    @Override
    public String getName() {
        return "sluice";
    }

    @Override
    public Connector create(String catalogName, Map<String, String> config, ConnectorContext context) {
        Map<String, String> left = new HashMap<>(config);
        String uri = left.remove("sluice.uri");
        if (uri == null || uri.isBlank()) {
            throw new IllegalArgumentException("catalog " + catalogName + ": sluice.uri is required (a node's URL, e.g. http://node-a:8080)");
        }
        Duration timeout = Duration.ofSeconds(30);
        String t = left.remove("sluice.node-timeout");
        if (t != null) {
            timeout = parseDuration(catalogName, "sluice.node-timeout", t);
        }
        Duration leaseTTL = Duration.ofMinutes(5);
        String l = left.remove("sluice.lease-ttl");
        if (l != null) {
            leaseTTL = parseDuration(catalogName, "sluice.lease-ttl", l);
        }
        String format = left.getOrDefault("sluice.format", "arrow");
        left.remove("sluice.format");
        if (!format.equals("arrow") && !format.equals("ndjson")) {
            throw new IllegalArgumentException("catalog " + catalogName + ": sluice.format " + format + ": want arrow or ndjson");
        }
        if (!left.isEmpty()) {
            throw new IllegalArgumentException("catalog " + catalogName + ": unknown properties " + left.keySet() + " (sluice.uri, sluice.node-timeout, sluice.lease-ttl, sluice.format)");
        }
        return new SluiceConnector(new SluiceClient(URI.create(uri.replaceAll("/+$", "")), timeout), leaseTTL, format);
    }

    private static Duration parseDuration(String catalog, String property, String s) {
        try {
            if (s.endsWith("ms")) {
                return Duration.ofMillis(Long.parseLong(s.substring(0, s.length() - 2)));
            }
            if (s.endsWith("s")) {
                return Duration.ofSeconds(Long.parseLong(s.substring(0, s.length() - 1)));
            }
            if (s.endsWith("m")) {
                return Duration.ofMinutes(Long.parseLong(s.substring(0, s.length() - 1)));
            }
        }
        catch (NumberFormatException e) {
            // reported below
        }
        throw new IllegalArgumentException("catalog " + catalog + ": " + property + " " + s + ": want e.g. 500ms, 30s or 2m");
    }
}
