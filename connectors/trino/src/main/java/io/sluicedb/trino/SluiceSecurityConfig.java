package io.sluicedb.trino;

import io.airlift.configuration.Config;
import io.airlift.configuration.ConfigDescription;
import io.airlift.configuration.ConfigSecuritySensitive;
import io.airlift.configuration.validation.FileExists;
import jakarta.validation.constraints.AssertTrue;

import java.io.File;
import java.util.Optional;

/**
 * How the connector proves who it is to the nodes and checks that they are who they say: a CA to verify their
 * certificates, an optional client certificate, and a token sent as {@code Authorization: Bearer}. The token needs
 * the {@code query} permission on the catalog's tables (it covers the read leases and the splits).
 */
public class SluiceSecurityConfig {
    private File caFile;
    private File certFile;
    private File keyFile;
    private String token;
    private File tokenFile;

    public Optional<@FileExists File> getCaFile() {
        return Optional.ofNullable(caFile);
    }

    @Config("sluice.tls.ca-file")
    @ConfigDescription("PEM file of the CA certificates that sign the nodes' certificates (default: the JVM's trust store)")
    public SluiceSecurityConfig setCaFile(File caFile) {
        this.caFile = caFile;
        return this;
    }

    public Optional<@FileExists File> getCertFile() {
        return Optional.ofNullable(certFile);
    }

    @Config("sluice.tls.cert-file")
    @ConfigDescription("PEM file of the client certificate (chain) shown to nodes that ask for one")
    public SluiceSecurityConfig setCertFile(File certFile) {
        this.certFile = certFile;
        return this;
    }

    public Optional<@FileExists File> getKeyFile() {
        return Optional.ofNullable(keyFile);
    }

    @Config("sluice.tls.key-file")
    @ConfigDescription("PEM file of the client certificate's private key (unencrypted)")
    public SluiceSecurityConfig setKeyFile(File keyFile) {
        this.keyFile = keyFile;
        return this;
    }

    public Optional<String> getToken() {
        return Optional.ofNullable(token);
    }

    @Config("sluice.token")
    @ConfigSecuritySensitive
    @ConfigDescription("Token sent to the nodes as Authorization: Bearer (e.g. ${ENV:SLUICE_TOKEN})")
    public SluiceSecurityConfig setToken(String token) {
        this.token = token;
        return this;
    }

    public Optional<@FileExists File> getTokenFile() {
        return Optional.ofNullable(tokenFile);
    }

    @Config("sluice.token-file")
    @ConfigDescription("File holding the token; read again for each request, so a rotated token needs no restart")
    public SluiceSecurityConfig setTokenFile(File tokenFile) {
        this.tokenFile = tokenFile;
        return this;
    }

    @AssertTrue(message = "sluice.tls.cert-file and sluice.tls.key-file go together: set both or neither")
    public boolean isClientCertificateWhole() {
        return (certFile == null) == (keyFile == null);
    }

    @AssertTrue(message = "sluice.token is empty")
    public boolean isTokenNotBlank() {
        return token == null || !token.isBlank();
    }
}
