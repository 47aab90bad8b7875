package io.sluicedb.trino;

import io.trino.spi.connector.ColumnHandle;
import io.trino.spi.connector.ConnectorRecordSetProvider;
import io.trino.spi.connector.ConnectorSession;
import io.trino.spi.connector.ConnectorSplit;
import io.trino.spi.connector.ConnectorTableHandle;
import io.trino.spi.connector.ConnectorTransactionHandle;
import io.trino.spi.connector.RecordCursor;
import io.trino.spi.connector.RecordSet;
import io.trino.spi.type.Type;

import java.util.ArrayList;
import java.util.List;

/** Reads one split: one node's NDJSON answer, streamed. */
public final class SluiceRecordSetProvider implements ConnectorRecordSetProvider {
    private final SluiceClient client;

    public SluiceRecordSetProvider(SluiceClient client) {
        this.client = client;
    }

    @Override
    public RecordSet getRecordSet(ConnectorTransactionHandle transaction, ConnectorSession session, ConnectorSplit split,
            ConnectorTableHandle table, List<? extends ColumnHandle> columns) {
        SluiceSplit s = (SluiceSplit) split;
        SluiceTableHandle t = (SluiceTableHandle) table;
        List<SluiceColumnHandle> cols = new ArrayList<>();
        for (ColumnHandle c : columns) {
            cols.add((SluiceColumnHandle) c);
        }
        return new RecordSet() {
            @Override
            public List<Type> getColumnTypes() {
                List<Type> types = new ArrayList<>();
                for (SluiceColumnHandle c : cols) {
                    types.add(c.trinoType());
                }
                return types;
            }

            @Override
            public RecordCursor cursor() {
                List<String> names = new ArrayList<>();
                for (SluiceColumnHandle c : cols) {
                    names.add(c.name());
                }
                if (names.isEmpty() && !t.sortBy().isEmpty()) {
                    // count(*): one small column per row is enough.
                    names.add(t.sortBy());
                }
                // The split is done when its cursor closes, read or not: the last one ends the lease.
                return new SluiceRecordCursor(s.node(), cols,
                        client.query(s.node(), t.table(), s.tier(), s.lease(), names, t.from(), t.to(), t.hashes()),
                        () -> client.leaseDone(t.table(), s.lease()));
            }
        };
    }
}
