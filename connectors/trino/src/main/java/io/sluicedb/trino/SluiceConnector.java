package io.sluicedb.trino;

import com.google.inject.Inject;
import io.airlift.bootstrap.LifeCycleManager;
import io.trino.spi.connector.Connector;
import io.trino.spi.connector.ConnectorMetadata;
import io.trino.spi.connector.ConnectorPageSourceProvider;
import io.trino.spi.connector.ConnectorSession;
import io.trino.spi.connector.ConnectorSplitManager;
import io.trino.spi.connector.ConnectorTransactionHandle;
import io.trino.spi.transaction.IsolationLevel;

import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A sluice cluster as a read-only Trino catalog. Each transaction (one per statement) has its own metadata, which
 * asks a node about a table once and remembers the answer until the transaction ends.
 */
public final class SluiceConnector implements Connector {
    private final LifeCycleManager lifeCycle;
    private final SluiceClient client;
    private final SluiceLeases leases;
    private final SluiceSplitManager splits;
    private final SluicePageSourceProvider pages;
    private final Map<SluiceTransactionHandle, SluiceMetadata> transactions = new ConcurrentHashMap<>();

    @Inject
    public SluiceConnector(LifeCycleManager lifeCycle, SluiceClient client, SluiceLeases leases, SluiceSplitManager splits, SluicePageSourceProvider pages) {
        this.lifeCycle = lifeCycle;
        this.client = client;
        this.leases = leases;
        this.splits = splits;
        this.pages = pages;
    }

    @Override
    public ConnectorTransactionHandle beginTransaction(IsolationLevel isolationLevel, boolean readOnly, boolean autoCommit) {
        SluiceTransactionHandle t = new SluiceTransactionHandle(UUID.randomUUID());
        transactions.put(t, new SluiceMetadata(client, leases));
        return t;
    }

    @Override
    public ConnectorMetadata getMetadata(ConnectorSession session, ConnectorTransactionHandle transaction) {
        SluiceMetadata m = transactions.get((SluiceTransactionHandle) transaction);
        if (m == null) {
            throw new IllegalStateException("sluice: no such transaction " + transaction + " (committed or rolled back)");
        }
        return m;
    }

    @Override
    public void commit(ConnectorTransactionHandle transaction) {
        transactions.remove((SluiceTransactionHandle) transaction);
    }

    @Override
    public void rollback(ConnectorTransactionHandle transaction) {
        transactions.remove((SluiceTransactionHandle) transaction);
    }

    @Override
    public ConnectorSplitManager getSplitManager() {
        return splits;
    }

    @Override
    public ConnectorPageSourceProvider getPageSourceProvider() {
        return pages;
    }

    @Override
    public void shutdown() {
        lifeCycle.stop();
    }
}
