package io.sluicedb.trino;

import io.trino.spi.connector.Connector;
import io.trino.spi.connector.ConnectorMetadata;
import io.trino.spi.connector.ConnectorPageSourceProvider;
import io.trino.spi.connector.ConnectorSession;
import io.trino.spi.connector.ConnectorSplitManager;
import io.trino.spi.connector.ConnectorTransactionHandle;
import io.trino.spi.transaction.IsolationLevel;

/** A sluice cluster as a read-only Trino catalog. */
public final class SluiceConnector implements Connector {
    private final SluiceClient client;
    private final SluiceLeases leases;

    private final String format;

    public SluiceConnector(SluiceClient client, java.time.Duration leaseTTL, String format) {
        this.client = client;
        this.format = format;
        this.leases = new SluiceLeases(client, leaseTTL);
    }

    @Override
    public ConnectorTransactionHandle beginTransaction(IsolationLevel isolationLevel, boolean readOnly, boolean autoCommit) {
        return SluiceTransactionHandle.INSTANCE;
    }

    @Override
    public ConnectorMetadata getMetadata(ConnectorSession session, ConnectorTransactionHandle transaction) {
        return new SluiceMetadata(client, leases);
    }

    @Override
    public ConnectorSplitManager getSplitManager() {
        return new SluiceSplitManager(leases);
    }

    @Override
    public ConnectorPageSourceProvider getPageSourceProvider() {
        return new SluicePageSourceProvider(client, format);
    }
}
