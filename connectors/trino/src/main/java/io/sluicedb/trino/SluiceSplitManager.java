package io.sluicedb.trino;

import io.trino.spi.connector.ConnectorSession;
import io.trino.spi.connector.ConnectorSplit;
import io.trino.spi.connector.ConnectorSplitManager;
import io.trino.spi.connector.ConnectorSplitSource;
import io.trino.spi.connector.ConnectorTableHandle;
import io.trino.spi.connector.ConnectorTransactionHandle;
import io.trino.spi.connector.Constraint;
import io.trino.spi.connector.DynamicFilter;
import io.trino.spi.connector.FixedSplitSource;

import java.util.ArrayList;
import java.util.List;

/**
 * One split per node: the first node's answers with the Iceberg table's rows and its store's (tier "all"), every
 * other node's with its store's only (tier "hot"), the same division as a cluster query of sluice itself.
 */
public final class SluiceSplitManager implements ConnectorSplitManager {
    private final SluiceClient client;

    public SluiceSplitManager(SluiceClient client) {
        this.client = client;
    }

    @Override
    public ConnectorSplitSource getSplits(ConnectorTransactionHandle transaction, ConnectorSession session,
            ConnectorTableHandle table, DynamicFilter dynamicFilter, Constraint constraint) {
        List<ConnectorSplit> splits = new ArrayList<>();
        for (String node : client.members()) {
            splits.add(new SluiceSplit(node, splits.isEmpty() ? "all" : "hot"));
        }
        return new FixedSplitSource(splits);
    }
}
