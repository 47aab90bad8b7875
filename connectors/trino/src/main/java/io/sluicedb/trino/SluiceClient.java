package io.sluicedb.trino;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.trino.spi.TrinoException;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import static io.trino.spi.StandardErrorCode.GENERIC_INTERNAL_ERROR;

/** The HTTP API of sluice nodes, as the connector uses it. */
public final class SluiceClient {
    private static final ObjectMapper JSON = new ObjectMapper();

    private final URI uri;
    private final Duration timeout;
    private final HttpClient http;

    public SluiceClient(URI uri, Duration timeout) {
        this.uri = uri;
        this.timeout = timeout;
        this.http = HttpClient.newBuilder().connectTimeout(timeout).version(HttpClient.Version.HTTP_1_1).build();
    }

    public Duration timeout() {
        return timeout;
    }

    /** A table as GET /v1/tables/{t} describes it. */
    public record Table(String name, String hashBy, String sortBy, List<Column> columns) {}

    public record Column(String name, String type) {}

    public List<String> tableNames() {
        List<String> out = new ArrayList<>();
        for (JsonNode t : get(uri, "/v1/tables").path("tables")) {
            out.add(t.path("name").asText());
        }
        return out;
    }

    /** The table, or null when the node has no such table. */
    public Table table(String name) {
        JsonNode t = getOrNull(uri, "/v1/tables/" + encode(name));
        if (t == null) {
            return null;
        }
        List<Column> cols = new ArrayList<>();
        for (JsonNode c : t.path("schema")) {
            cols.add(new Column(c.path("name").asText(), c.path("type").asText()));
        }
        return new Table(t.path("name").asText(), t.path("hashBy").asText(""), t.path("sortBy").asText(""), cols);
    }

    /** A read lease (POST /v1/tables/{t}/leases): its id and the splits to read under it. */
    public record Lease(String id, List<LeaseSplit> splits) {}

    /** One node's part of a lease; the node "" is the node the catalog names. */
    public record LeaseSplit(String node, String tier) {}

    /**
     * Opens a read lease on the table through the catalog's node: every node holds its commits until the lease's
     * splits are read, it is ended, or its TTL fires (docs/cluster.md, "Read leases").
     */
    public Lease openLease(String table, Duration ttl) {
        return lease(post("/v1/tables/" + encode(table) + "/leases", "{\"ttl\":\"" + ttl.toMillis() + "ms\"}"), table);
    }

    /** One more scan of the table under the same lease (a self-join): its splits again. */
    public Lease reuseLease(String table, String id) {
        return lease(post("/v1/tables/" + encode(table) + "/leases/" + encode(id) + "/splits", ""), table);
    }

    /** Reports one split of the lease read; the last ends it. Errors are ignored: the TTL ends it anyway. */
    public void leaseDone(String table, String id) {
        quietly("POST", "/v1/tables/" + encode(table) + "/leases/" + encode(id) + "/done");
    }

    /** Ends the lease now (the query is over). Errors are ignored: the TTL ends it anyway. */
    public void endLease(String table, String id) {
        quietly("DELETE", "/v1/tables/" + encode(table) + "/leases/" + encode(id));
    }

    private Lease lease(JsonNode n, String table) {
        List<LeaseSplit> splits = new ArrayList<>();
        for (JsonNode s : n.path("splits")) {
            String node = s.path("node").asText("");
            splits.add(new LeaseSplit(node.isEmpty() ? uri.toString() : node, s.path("tier").asText()));
        }
        return new Lease(n.path("id").asText(), splits);
    }

    private JsonNode post(String path, String body) {
        URI u = URI.create(uri + path);
        try {
            HttpResponse<byte[]> resp = http.send(HttpRequest.newBuilder(u).timeout(timeout.multipliedBy(2))
                    .header("Content-Type", "application/json")
                    .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofByteArray());
            if (resp.statusCode() != 200) {
                throw new TrinoException(GENERIC_INTERNAL_ERROR, "sluice node " + u + ": " + resp.statusCode() + " " + new String(resp.body(), StandardCharsets.UTF_8).strip());
            }
            return JSON.readTree(resp.body());
        }
        catch (IOException e) {
            throw new TrinoException(GENERIC_INTERNAL_ERROR, "sluice node " + u + ": " + e, e);
        }
        catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new TrinoException(GENERIC_INTERNAL_ERROR, "sluice node " + u + ": interrupted", e);
        }
    }

    private void quietly(String method, String path) {
        try {
            http.send(HttpRequest.newBuilder(URI.create(uri + path)).timeout(timeout).method(method, HttpRequest.BodyPublishers.noBody()).build(),
                    HttpResponse.BodyHandlers.discarding());
        }
        catch (IOException e) {
            // the lease's TTL ends it
        }
        catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Starts a query on one node (under a lease when lease is not null) and returns its answer's body, in format. */
    public InputStream query(String node, String table, String tier, String lease, String format, List<String> columns, String from, String to, List<String> hashes) {
        StringBuilder q = new StringBuilder("/v1/tables/").append(encode(table)).append("/query?format=").append(format).append("&tier=").append(tier);
        if (lease != null) {
            q.append("&lease=").append(encode(lease));
        }
        if (!columns.isEmpty()) {
            q.append("&columns=").append(encode(String.join(",", columns)));
        }
        if (from != null) {
            q.append("&from=").append(encode(from));
        }
        if (to != null) {
            q.append("&to=").append(encode(to));
        }
        for (String h : hashes) {
            q.append("&hash=").append(encode(h));
        }
        URI u = URI.create(node + q);
        try {
            HttpResponse<InputStream> resp = http.send(HttpRequest.newBuilder(u).GET().build(), HttpResponse.BodyHandlers.ofInputStream());
            if (resp.statusCode() != 200) {
                String body;
                try (InputStream in = resp.body()) {
                    body = new String(in.readNBytes(1024), StandardCharsets.UTF_8);
                }
                throw new TrinoException(GENERIC_INTERNAL_ERROR, "sluice node " + node + ": " + resp.statusCode() + " " + body.strip());
            }
            return resp.body();
        }
        catch (IOException e) {
            throw new TrinoException(GENERIC_INTERNAL_ERROR, "sluice node " + node + ": " + e, e);
        }
        catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new TrinoException(GENERIC_INTERNAL_ERROR, "sluice node " + node + ": interrupted", e);
        }
    }

    private JsonNode get(URI base, String path) {
        JsonNode n = getOrNull(base, path);
        if (n == null) {
            throw new TrinoException(GENERIC_INTERNAL_ERROR, "sluice node " + base + path + ": 404");
        }
        return n;
    }

    private JsonNode getOrNull(URI base, String path) {
        URI u = URI.create(base + path);
        try {
            HttpResponse<byte[]> resp = http.send(HttpRequest.newBuilder(u).timeout(timeout).GET().build(), HttpResponse.BodyHandlers.ofByteArray());
            if (resp.statusCode() == 404) {
                return null;
            }
            if (resp.statusCode() != 200) {
                throw new TrinoException(GENERIC_INTERNAL_ERROR, "sluice node " + u + ": " + resp.statusCode() + " " + new String(resp.body(), StandardCharsets.UTF_8).strip());
            }
            return JSON.readTree(resp.body());
        }
        catch (IOException e) {
            throw new UncheckedIOException("sluice node " + u, e);
        }
        catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new TrinoException(GENERIC_INTERNAL_ERROR, "sluice node " + u + ": interrupted", e);
        }
    }

    private static String encode(String s) {
        return URLEncoder.encode(s, StandardCharsets.UTF_8);
    }
}
