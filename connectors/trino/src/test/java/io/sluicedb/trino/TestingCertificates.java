package io.sluicedb.trino;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.cert.Certificate;
import java.util.Base64;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Self-signed certificates made for one test by the JDK's keytool (for 127.0.0.1 and localhost), each as a PKCS#12
 * key store for a server and as PEM files for the connector, the form its catalog properties take.
 */
final class TestingCertificates {
    static final char[] PASSWORD = "changeit".toCharArray();

    private final Path dir;

    private TestingCertificates(Path dir) {
        this.dir = dir;
    }

    static TestingCertificates create(Path dir, String... names) throws IOException, InterruptedException, GeneralSecurityException {
        TestingCertificates certs = new TestingCertificates(dir);
        for (String name : names) {
            certs.make(name);
        }
        return certs;
    }

    Path keyStore(String name) {
        return dir.resolve(name + ".p12");
    }

    Path certFile(String name) {
        return dir.resolve(name + ".pem");
    }

    Path keyFile(String name) {
        return dir.resolve(name + ".key");
    }

    KeyStore load(String name) throws IOException, GeneralSecurityException {
        KeyStore ks = KeyStore.getInstance("PKCS12");
        try (InputStream in = Files.newInputStream(keyStore(name))) {
            ks.load(in, PASSWORD);
        }
        return ks;
    }

    private void make(String name) throws IOException, InterruptedException, GeneralSecurityException {
        Path keytool = Path.of(System.getProperty("java.home"), "bin", "keytool");
        Process p = new ProcessBuilder(List.of(keytool.toString(), "-genkeypair", "-alias", name, "-keyalg", "EC", "-groupname", "secp256r1",
                "-dname", "CN=" + name, "-ext", "SAN=ip:127.0.0.1,dns:localhost", "-validity", "2",
                "-keystore", keyStore(name).toString(), "-storetype", "PKCS12", "-storepass", new String(PASSWORD)))
                .redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
            p.destroyForcibly();
            throw new IOException("keytool " + name + ": " + out);
        }
        KeyStore ks = load(name);
        Certificate cert = ks.getCertificate(name);
        PrivateKey key = (PrivateKey) ks.getKey(name, PASSWORD);
        Files.writeString(certFile(name), pem("CERTIFICATE", cert.getEncoded()));
        Files.writeString(keyFile(name), pem("PRIVATE KEY", key.getEncoded()));
    }

    private static String pem(String type, byte[] der) {
        return "-----BEGIN " + type + "-----\n" + Base64.getMimeEncoder(64, "\n".getBytes(StandardCharsets.US_ASCII)).encodeToString(der)
                + "\n-----END " + type + "-----\n";
    }
}
