package io.sluicedb.trino;

import io.trino.spi.connector.Connector;
import io.trino.spi.connector.ConnectorMetadata;
import io.trino.spi.connector.ConnectorRecordSetProvider;
import io.trino.spi.connector.ConnectorSession;
import io.trino.spi.connector.ConnectorSplitManager;
import io.trino.spi.connector.ConnectorTransactionHandle;
import io.trino.spi.transaction.IsolationLevel;

/** A sluice cluster as a read-only Trino catalog. */
public final class SluiceConnector implements Connector {
    private final SluiceClient client;

    public SluiceConnector(SluiceClient client) {
        this.client = client;
    }

    @Override
    public ConnectorTransactionHandle beginTransaction(IsolationLevel isolationLevel, boolean readOnly, boolean autoCommit) {
        return SluiceTransactionHandle.INSTANCE;
    }

    @Override
    public ConnectorMetadata getMetadata(ConnectorSession session, ConnectorTransactionHandle transaction) {
        return new SluiceMetadata(client);
    }

    @Override
    public ConnectorSplitManager getSplitManager() {
        return new SluiceSplitManager(client);
    }

    @Override
    public ConnectorRecordSetProvider getRecordSetProvider() {
        return new SluiceRecordSetProvider(client);
    }
}
