package io.sluicedb.trino;

import io.trino.spi.Plugin;
import io.trino.spi.connector.ConnectorFactory;

import java.util.List;

/** The Trino plugin: one connector, named "sluice". */
public final class SluicePlugin implements Plugin {
    @Override
    public Iterable<ConnectorFactory> getConnectorFactories() {
        return List.of(new SluiceConnectorFactory());
    }
}
