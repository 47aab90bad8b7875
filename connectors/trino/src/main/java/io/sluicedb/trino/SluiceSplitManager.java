package io.sluicedb.trino;

import com.google.inject.Inject;
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
 * One split per node, all under one read lease the catalog's node opens: the lease's coordinator answers with the
 * Iceberg table's rows and its store's (tier "all"), every other node with its store's rows the table lacks (tier
 * "hot"), and no node commits until the splits are read, so each row is read once (docs/cluster.md).
 *
 * <p>A keyed table's lease has one split (tier "cluster"): per-node splits would show a key once per store its
 * changes reached, so the lease's coordinator reads every node's part itself and merges them by key. The lease
 * decides, so the splits are taken as it hands them out.
 */
public final class SluiceSplitManager implements ConnectorSplitManager {
    private final SluiceLeases leases;

    @Inject
    public SluiceSplitManager(SluiceLeases leases) {
        this.leases = leases;
    }

    @Override
    public ConnectorSplitSource getSplits(ConnectorTransactionHandle transaction, ConnectorSession session,
            ConnectorTableHandle table, DynamicFilter dynamicFilter, Constraint constraint) {
        SluiceTableHandle t = (SluiceTableHandle) table;
        SluiceClient.Lease lease = leases.lease(session.getQueryId(), t.table());
        List<ConnectorSplit> splits = new ArrayList<>();
        for (SluiceClient.LeaseSplit s : lease.splits()) {
            splits.add(new SluiceSplit(s.node(), s.tier(), lease.id()));
        }
        return new FixedSplitSource(splits);
    }
}
