package io.sluicedb.trino;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import com.sun.net.httpserver.HttpsConfigurator;
import com.sun.net.httpserver.HttpsParameters;
import com.sun.net.httpserver.HttpsServer;

import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.TrustManagerFactory;

import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Function;

/**
 * A stand-in for a sluice node on a free 127.0.0.1 port: the JDK's own HTTP(S) server answering the routes a test
 * gives it and recording every request it gets, so a test sees what the connector sent and how often.
 */
final class TestingNode implements AutoCloseable {
    /** One answer: its status and body. */
    record Answer(int status, String body) {
        static Answer json(String body) {
            return new Answer(200, body);
        }
    }

    /** One request as the node saw it (query: its query string, null when it has none). */
    record Request(String method, String path, String authorization, String query) {}

    private final HttpServer server;
    private final Map<String, Function<Request, Answer>> routes = new ConcurrentHashMap<>();
    private final List<Request> requests = new CopyOnWriteArrayList<>();

    private TestingNode(HttpServer server) {
        this.server = server;
        server.createContext("/", this::handle);
        server.start();
    }

    static TestingNode http() throws IOException {
        return new TestingNode(HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0));
    }

    /**
     * An HTTPS node with the certificate named serverCert; when clientCa is not null it asks for a client
     * certificate and accepts only one that clientCa's certificate signed.
     */
    static TestingNode https(TestingCertificates certs, String serverCert, String clientCa) throws IOException, GeneralSecurityException {
        KeyManagerFactory keys = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        keys.init(certs.load(serverCert), TestingCertificates.PASSWORD);
        TrustManagerFactory trust = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        if (clientCa != null) {
            KeyStore anchors = KeyStore.getInstance("PKCS12");
            anchors.load(null, null);
            anchors.setCertificateEntry(clientCa, certs.load(clientCa).getCertificate(clientCa));
            trust.init(anchors);
        }
        else {
            trust.init((KeyStore) null);
        }
        SSLContext tls = SSLContext.getInstance("TLS");
        tls.init(keys.getKeyManagers(), trust.getTrustManagers(), null);
        HttpsServer server = HttpsServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        server.setHttpsConfigurator(new HttpsConfigurator(tls) {
            @Override
            public void configure(HttpsParameters params) {
                SSLParameters p = getSSLContext().getDefaultSSLParameters();
                p.setNeedClientAuth(clientCa != null);
                params.setSSLParameters(p);
            }
        });
        return new TestingNode(server);
    }

    /** Answers method and path (without the query string) with answer. */
    TestingNode route(String method, String path, Function<Request, Answer> answer) {
        routes.put(method + " " + path, answer);
        return this;
    }

    TestingNode route(String method, String path, Answer answer) {
        return route(method, path, r -> answer);
    }

    String uri() {
        String scheme = server instanceof HttpsServer ? "https" : "http";
        return scheme + "://127.0.0.1:" + server.getAddress().getPort();
    }

    List<Request> requests() {
        return List.copyOf(requests);
    }

    long count(String method, String path) {
        return requests.stream().filter(r -> r.method().equals(method) && r.path().equals(path)).count();
    }

    private void handle(HttpExchange exchange) throws IOException {
        try (exchange) {
            Request r = new Request(exchange.getRequestMethod(), exchange.getRequestURI().getPath(), exchange.getRequestHeaders().getFirst("Authorization"),
                    exchange.getRequestURI().getRawQuery());
            requests.add(r);
            exchange.getRequestBody().readAllBytes();
            Function<Request, Answer> route = routes.get(r.method() + " " + r.path());
            Answer a = route == null ? new Answer(404, "{\"error\":\"no route " + r.method() + " " + r.path() + "\"}") : route.apply(r);
            byte[] body = a.body().getBytes(StandardCharsets.UTF_8);
            exchange.getResponseHeaders().set("Content-Type", "application/json");
            exchange.sendResponseHeaders(a.status(), body.length == 0 ? -1 : body.length);
            if (body.length > 0) {
                try (OutputStream out = exchange.getResponseBody()) {
                    out.write(body);
                }
            }
        }
    }

    @Override
    public void close() {
        server.stop(0);
    }
}
