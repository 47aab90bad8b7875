package io.sluicedb.trino;

import io.airlift.configuration.Config;
import io.airlift.configuration.ConfigDescription;
import io.airlift.units.Duration;
import io.airlift.units.MaxDuration;
import io.airlift.units.MinDuration;
import jakarta.validation.constraints.AssertTrue;
import jakarta.validation.constraints.NotNull;

import java.net.URI;
import java.util.Locale;

import static java.util.concurrent.TimeUnit.MINUTES;
import static java.util.concurrent.TimeUnit.SECONDS;

/** Where the catalog's cluster is and how the connector reads it; the TLS files and the token are in {@link SluiceSecurityConfig}. */
public class SluiceConfig {
    /** How a node sends a query's answer. */
    public enum Format {
        /** Arrow IPC batches, read straight into pages: sluice-full's nodes. */
        ARROW,
        /** One JSON object per row: the lean sluice binary, built without Arrow. */
        NDJSON;

        /** The value of the query's format parameter. */
        public String wireName() {
            return name().toLowerCase(Locale.ROOT);
        }
    }

    private URI uri;
    private Duration nodeTimeout = new Duration(30, SECONDS);
    private Duration leaseTtl = new Duration(5, MINUTES);
    private Format format = Format.ARROW;

    @NotNull
    public URI getUri() {
        return uri;
    }

    @Config("sluice.uri")
    @ConfigDescription("Any node of the cluster, http:// or https:// (it names the others)")
    public SluiceConfig setUri(URI uri) {
        this.uri = uri;
        return this;
    }

    @AssertTrue(message = "sluice.uri must be an http:// or https:// URL with a host, e.g. https://node-a:8443")
    public boolean isUriHttp() {
        // null is reported by @NotNull alone.
        return uri == null || (("http".equals(uri.getScheme()) || "https".equals(uri.getScheme())) && uri.getHost() != null);
    }

    @NotNull
    @MinDuration("1ms")
    public Duration getNodeTimeout() {
        return nodeTimeout;
    }

    @Config("sluice.node-timeout")
    @ConfigDescription("How long to wait to connect to a node, and for each metadata or lease answer")
    public SluiceConfig setNodeTimeout(Duration nodeTimeout) {
        this.nodeTimeout = nodeTimeout;
        return this;
    }

    // The nodes refuse a lease longer than an hour: a forgotten lease holds every node's commits until it ends.
    @NotNull
    @MinDuration("1s")
    @MaxDuration("1h")
    public Duration getLeaseTtl() {
        return leaseTtl;
    }

    @Config("sluice.lease-ttl")
    @ConfigDescription("How long a statement's splits may take to be read under its read lease (at most 1h)")
    public SluiceConfig setLeaseTtl(Duration leaseTtl) {
        this.leaseTtl = leaseTtl;
        return this;
    }

    @NotNull
    public Format getFormat() {
        return format;
    }

    @Config("sluice.format")
    @ConfigDescription("How nodes send rows: ARROW (sluice-full) or NDJSON (the lean sluice binary)")
    public SluiceConfig setFormat(Format format) {
        this.format = format;
        return this;
    }
}
