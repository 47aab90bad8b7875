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

    /** The cluster's members (GET /v1/cluster), or this node alone when it has no cluster config. */
    public List<String> members() {
        List<String> out = new ArrayList<>();
        for (JsonNode m : get(uri, "/v1/cluster").path("members")) {
            out.add(m.asText());
        }
        if (out.isEmpty()) {
            out.add(uri.toString());
        }
        return out;
    }

    /** Starts a query on one node and returns its NDJSON answer's body. */
    public InputStream query(String node, String table, String tier, List<String> columns, String from, String to, List<String> hashes) {
        StringBuilder q = new StringBuilder("/v1/tables/").append(encode(table)).append("/query?format=ndjson&tier=").append(tier);
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
