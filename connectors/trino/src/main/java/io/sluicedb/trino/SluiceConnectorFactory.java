package io.sluicedb.trino;

import com.google.inject.Injector;
import io.airlift.bootstrap.Bootstrap;
import io.trino.spi.connector.Connector;
import io.trino.spi.connector.ConnectorContext;
import io.trino.spi.connector.ConnectorFactory;

import java.util.Map;

import static java.util.Objects.requireNonNull;

/**
 * Makes a catalog from its properties file (README.md lists them; {@link SluiceConfig} and
 * {@link SluiceSecurityConfig} define them):
 * <pre>
 * connector.name=sluice
 * sluice.uri=https://node-a:8443
 * sluice.tls.ca-file=/etc/trino/sluice-ca.pem
 * sluice.token-file=/etc/trino/sluice.token
 * </pre>
 * Airlift's bootstrap maps and validates them as it does for Trino's own connectors: durations such as 1.5s or 1h,
 * an unknown property is an error, and ${ENV:NAME} takes a value from the environment.
 */
public final class SluiceConnectorFactory implements ConnectorFactory {
    @Override
    public String getName() {
        return "sluice";
    }

    @Override
    public Connector create(String catalogName, Map<String, String> config, ConnectorContext context) {
        requireNonNull(config, "config is null");
        Injector injector = new Bootstrap(new SluiceModule())
                .doNotInitializeLogging()
                .setRequiredConfigurationProperties(config)
                .initialize();
        return injector.getInstance(SluiceConnector.class);
    }
}
