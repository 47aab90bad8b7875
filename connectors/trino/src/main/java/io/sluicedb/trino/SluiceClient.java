package io.sluicedb.trino;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.google.inject.Inject;
import io.airlift.security.pem.PemReader;
import io.trino.spi.TrinoException;
import jakarta.annotation.PreDestroy;

import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

import static io.sluicedb.trino.SluiceErrorCode.SLUICE_ACCESS_DENIED;
import static io.sluicedb.trino.SluiceErrorCode.SLUICE_BAD_ANSWER;
import static io.sluicedb.trino.SluiceErrorCode.SLUICE_LEASE_EXPIRED;
import static io.sluicedb.trino.SluiceErrorCode.SLUICE_NODE_ERROR;
import static io.sluicedb.trino.SluiceErrorCode.SLUICE_TOKEN_UNREADABLE;

/**
 * The HTTP API of sluice nodes, as the connector uses it: over TLS when the node URIs are https://, verified against
 * the catalog's CA, with its client certificate and its token. The token goes only into the Authorization header:
 * never into a log line or an error message, even when a node echoes it back.
 */
public final class SluiceClient implements AutoCloseable {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String REDACTED = "[token]";

    private final URI uri;
    private final Duration timeout;
    private final Optional<String> token;
    private final Optional<File> tokenFile;
    private final HttpClient http;

    @Inject
    public SluiceClient(SluiceConfig config, SluiceSecurityConfig security) {
        this.uri = URI.create(config.getUri().toString().replaceAll("/+$", ""));
        this.timeout = config.getNodeTimeout().toJavaTime();
        // Checked here rather than as a constraint of the config class, whose full-mapping test sets every property.
        if (security.getToken().isPresent() && security.getTokenFile().isPresent()) {
            throw new IllegalArgumentException("set sluice.token or sluice.token-file, not both");
        }
        this.token = security.getToken();
        this.tokenFile = security.getTokenFile();
        this.http = HttpClient.newBuilder()
                .connectTimeout(timeout)
                .version(HttpClient.Version.HTTP_1_1)
                .sslContext(sslContext(security))
                .build();
    }

    /**
     * The TLS context for https:// nodes: the catalog's CA as the only trust anchors when it names one (so a
     * certificate from any other CA, public or not, is refused), and its client certificate when it has one.
     */
    static SSLContext sslContext(SluiceSecurityConfig security) {
        try {
            if (security.getCaFile().isEmpty() && security.getCertFile().isEmpty()) {
                return SSLContext.getDefault();
            }
            TrustManagerFactory trust = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
            if (security.getCaFile().isPresent()) {
                trust.init(PemReader.loadTrustStore(security.getCaFile().get()));
            }
            else {
                trust.init((KeyStore) null);
            }
            KeyManagerFactory keys = null;
            if (security.getCertFile().isPresent()) {
                KeyStore store = PemReader.loadKeyStore(security.getCertFile().get(), security.getKeyFile().orElseThrow(), Optional.empty());
                keys = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
                keys.init(store, new char[0]);
            }
            SSLContext context = SSLContext.getInstance("TLS");
            context.init(keys == null ? null : keys.getKeyManagers(), trust.getTrustManagers(), null);
            return context;
        }
        catch (IOException | GeneralSecurityException e) {
            throw new IllegalArgumentException("sluice TLS files (sluice.tls.*): " + e.getMessage(), e);
        }
    }

    @PreDestroy
    @Override
    public void close() {
        http.close();
    }

    /** A table as GET /v1/tables/{t} describes it. */
    public record Table(String name, String hashBy, String sortBy, List<Column> columns) {}

    public record Column(String name, String type) {}

    public List<String> tableNames() {
        JsonNode n = getOrNull("/v1/tables");
        if (n == null) {
            throw new TrinoException(SLUICE_BAD_ANSWER, "sluice node " + uri + "/v1/tables: 404 (is it a sluice node?)");
        }
        List<String> out = new ArrayList<>();
        for (JsonNode t : n.path("tables")) {
            out.add(t.path("name").asText());
        }
        return out;
    }

    /** The table, or empty when the node has no such table. */
    public Optional<Table> table(String name) {
        JsonNode t = getOrNull("/v1/tables/" + encode(name));
        if (t == null) {
            return Optional.empty();
        }
        List<Column> cols = new ArrayList<>();
        for (JsonNode c : t.path("schema")) {
            cols.add(new Column(c.path("name").asText(), c.path("type").asText()));
        }
        return Optional.of(new Table(t.path("name").asText(), t.path("hashBy").asText(""), t.path("sortBy").asText(""), cols));
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
        return lease(post("/v1/tables/" + encode(table) + "/leases", "{\"ttl\":\"" + ttl.toMillis() + "ms\"}"));
    }

    /** One more scan of the table under the same lease (a self-join): its splits again. */
    public Lease reuseLease(String table, String id) {
        return lease(post("/v1/tables/" + encode(table) + "/leases/" + encode(id) + "/splits", ""));
    }

    /** Reports one split of the lease read; the last ends it. Errors are ignored: the TTL ends it anyway. */
    public void leaseDone(String table, String id) {
        quietly("POST", "/v1/tables/" + encode(table) + "/leases/" + encode(id) + "/done");
    }

    /** Ends the lease now (the query is over). Errors are ignored: the TTL ends it anyway. */
    public void endLease(String table, String id) {
        quietly("DELETE", "/v1/tables/" + encode(table) + "/leases/" + encode(id));
    }

    private Lease lease(JsonNode n) {
        List<LeaseSplit> splits = new ArrayList<>();
        for (JsonNode s : n.path("splits")) {
            String node = s.path("node").asText("");
            splits.add(new LeaseSplit(node.isEmpty() ? uri.toString() : node, s.path("tier").asText()));
        }
        return new Lease(n.path("id").asText(), splits);
    }

    private JsonNode post(String path, String body) {
        URI u = URI.create(uri + path);
        HttpResponse<byte[]> resp = send(u, request(u).timeout(timeout.multipliedBy(2))
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(body)), HttpResponse.BodyHandlers.ofByteArray());
        if (resp.statusCode() != 200) {
            throw refused(u, resp.statusCode(), new String(resp.body(), StandardCharsets.UTF_8));
        }
        return json(u, resp.body());
    }

    private void quietly(String method, String path) {
        try {
            URI u = URI.create(uri + path);
            send(u, request(u).timeout(timeout).method(method, HttpRequest.BodyPublishers.noBody()), HttpResponse.BodyHandlers.discarding());
        }
        catch (TrinoException e) {
            // the lease's TTL ends it
        }
    }

    /** Starts a query on one node (under a lease when lease is not null) and returns its answer's body, in format. */
    public InputStream query(String node, String table, String tier, String lease, SluiceConfig.Format format, List<String> columns, String from, String to, List<String> hashes) {
        StringBuilder q = new StringBuilder("/v1/tables/").append(encode(table)).append("/query?format=").append(format.wireName()).append("&tier=").append(tier);
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
        HttpResponse<InputStream> resp = send(u, request(u).GET(), HttpResponse.BodyHandlers.ofInputStream());
        if (resp.statusCode() != 200) {
            String body;
            try (InputStream in = resp.body()) {
                body = new String(in.readNBytes(1024), StandardCharsets.UTF_8);
            }
            catch (IOException e) {
                body = "(its answer broke off: " + e.getMessage() + ")";
            }
            throw refused(u, resp.statusCode(), body);
        }
        return resp.body();
    }

    private JsonNode getOrNull(String path) {
        URI u = URI.create(uri + path);
        HttpResponse<byte[]> resp = send(u, request(u).timeout(timeout).GET(), HttpResponse.BodyHandlers.ofByteArray());
        if (resp.statusCode() == 404) {
            return null;
        }
        if (resp.statusCode() != 200) {
            throw refused(u, resp.statusCode(), new String(resp.body(), StandardCharsets.UTF_8));
        }
        return json(u, resp.body());
    }

    /** A request to u with the catalog's token, if it has one. */
    private HttpRequest.Builder request(URI u) {
        HttpRequest.Builder b = HttpRequest.newBuilder(u);
        bearer().ifPresent(t -> b.header("Authorization", "Bearer " + t));
        return b;
    }

    /** The token: the file's is read for each request, so that a token rotated on disk is used without a restart. */
    private Optional<String> bearer() {
        if (tokenFile.isEmpty()) {
            return token;
        }
        try {
            String t = Files.readString(tokenFile.get().toPath(), StandardCharsets.UTF_8).strip();
            if (t.isEmpty()) {
                throw new TrinoException(SLUICE_TOKEN_UNREADABLE, "sluice.token-file " + tokenFile.get() + " is empty");
            }
            return Optional.of(t);
        }
        catch (IOException e) {
            throw new TrinoException(SLUICE_TOKEN_UNREADABLE, "sluice.token-file " + tokenFile.get() + ": " + e.getMessage(), e);
        }
    }

    private <T> HttpResponse<T> send(URI u, HttpRequest.Builder request, HttpResponse.BodyHandler<T> handler) {
        try {
            return http.send(request.build(), handler);
        }
        catch (IOException e) {
            throw new TrinoException(SLUICE_NODE_ERROR, "sluice node " + u + ": " + redact(String.valueOf(e)), e);
        }
        catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new TrinoException(SLUICE_NODE_ERROR, "sluice node " + u + ": interrupted", e);
        }
    }

    /** The error for a node's answer other than 200: its status decides the code. */
    private TrinoException refused(URI u, int status, String body) {
        SluiceErrorCode code = switch (status) {
            case 401, 403 -> SLUICE_ACCESS_DENIED;
            case 410 -> SLUICE_LEASE_EXPIRED;
            default -> SLUICE_NODE_ERROR;
        };
        return new TrinoException(code, "sluice node " + u + ": " + status + " " + redact(body.strip()));
    }

    private static JsonNode json(URI u, byte[] body) {
        try {
            return JSON.readTree(body);
        }
        catch (IOException e) {
            throw new TrinoException(SLUICE_BAD_ANSWER, "sluice node " + u + ": its answer is not JSON: " + e.getMessage(), e);
        }
    }

    /** text with the catalog's token blotted out: a node or a proxy may echo a request's header in its error. */
    private String redact(String text) {
        Optional<String> t;
        try {
            t = bearer();
        }
        catch (TrinoException e) {
            t = Optional.empty();
        }
        return t.filter(s -> !s.isEmpty()).map(s -> text.replace(s, REDACTED)).orElse(text);
    }

    private static String encode(String s) {
        return URLEncoder.encode(s, StandardCharsets.UTF_8);
    }
}
