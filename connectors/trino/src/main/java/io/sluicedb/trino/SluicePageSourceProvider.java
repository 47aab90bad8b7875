package io.sluicedb.trino;

import com.google.inject.Inject;
import io.trino.spi.connector.ColumnHandle;
import io.trino.spi.connector.ConnectorPageSource;
import io.trino.spi.connector.ConnectorPageSourceProvider;
import io.trino.spi.connector.ConnectorSession;
import io.trino.spi.connector.ConnectorSplit;
import io.trino.spi.connector.ConnectorTableHandle;
import io.trino.spi.connector.ConnectorTransactionHandle;
import io.trino.spi.connector.DynamicFilter;
import io.trino.spi.connector.RecordPageSource;

import java.util.ArrayList;
import java.util.List;

/**
 * Reads one split: one node's answer, streamed, as Arrow batches straight into pages (format "arrow", the default),
 * or as NDJSON rows through a record cursor (format "ndjson", for a node built without Arrow: the lean sluice binary).
 * The split is done when its page source closes, read or not: the last one ends the lease.
 *
 * <p>A keyed table's one split (tier "cluster": every node's part merged by key on the lease's coordinator) is
 * always read as NDJSON: the node merges the nodes' answers line by line and answers in that format only.
 */
public final class SluicePageSourceProvider implements ConnectorPageSourceProvider {
    private final SluiceClient client;
    private final SluiceConfig.Format format;

    @Inject
    public SluicePageSourceProvider(SluiceClient client, SluiceConfig config) {
        this.client = client;
        this.format = config.getFormat();
    }

    @Override
    public ConnectorPageSource createPageSource(ConnectorTransactionHandle transaction, ConnectorSession session, ConnectorSplit split,
            ConnectorTableHandle table, List<ColumnHandle> columns, DynamicFilter dynamicFilter) {
        SluiceSplit s = (SluiceSplit) split;
        SluiceTableHandle t = (SluiceTableHandle) table;
        List<SluiceColumnHandle> cols = new ArrayList<>();
        List<String> names = new ArrayList<>();
        for (ColumnHandle c : columns) {
            SluiceColumnHandle h = (SluiceColumnHandle) c;
            cols.add(h);
            names.add(h.name());
        }
        if (names.isEmpty() && !t.sortBy().isEmpty()) {
            // count(*): one small column per row is enough.
            names.add(t.sortBy());
        }
        Runnable done = () -> client.leaseDone(t.table(), s.lease());
        SluiceConfig.Format format = s.merged() ? SluiceConfig.Format.NDJSON : this.format;
        var body = client.query(s.node(), t.table(), s.tier(), s.lease(), format, names, t.from(), t.to(), t.hashes());
        if (format == SluiceConfig.Format.ARROW) {
            return new SluiceArrowPageSource(s.node(), cols, names.size(), body, done);
        }
        return new RecordPageSource(cols.stream().map(SluiceColumnHandle::trinoType).toList(), new SluiceRecordCursor(s.node(), cols, body, done));
    }
}
