package io.sluicedb.trino;

import io.airlift.slice.Slice;
import io.trino.spi.connector.ColumnHandle;
import io.trino.spi.connector.ColumnMetadata;
import io.trino.spi.connector.ConnectorMetadata;
import io.trino.spi.connector.ConnectorSession;
import io.trino.spi.connector.ConnectorTableHandle;
import io.trino.spi.connector.ConnectorTableMetadata;
import io.trino.spi.connector.ConnectorTableVersion;
import io.trino.spi.connector.Constraint;
import io.trino.spi.connector.ConstraintApplicationResult;
import io.trino.spi.connector.SchemaTableName;
import io.trino.spi.predicate.Domain;
import io.trino.spi.predicate.Range;
import io.trino.spi.type.LongTimestampWithTimeZone;

import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/** The catalog's one schema, "cluster", holds the node's tables. */
public final class SluiceMetadata implements ConnectorMetadata {
    public static final String SCHEMA = "cluster";

    private final SluiceClient client;
    private final SluiceLeases leases;

    SluiceMetadata(SluiceClient client, SluiceLeases leases) {
        this.client = client;
        this.leases = leases;
    }

    /** The query is over (read, failed or cancelled): end its read leases, so no node holds its commits longer. */
    @Override
    public void cleanupQuery(ConnectorSession session) {
        leases.end(session.getQueryId());
    }

    @Override
    public List<String> listSchemaNames(ConnectorSession session) {
        return List.of(SCHEMA);
    }

    @Override
    public ConnectorTableHandle getTableHandle(ConnectorSession session, SchemaTableName name,
            Optional<ConnectorTableVersion> startVersion, Optional<ConnectorTableVersion> endVersion) {
        if (!name.getSchemaName().equals(SCHEMA) || startVersion.isPresent() || endVersion.isPresent()) {
            return null;
        }
        SluiceClient.Table t = client.table(name.getTableName());
        if (t == null) {
            return null;
        }
        return new SluiceTableHandle(t.name(), t.hashBy(), t.sortBy(), null, null, List.of());
    }

    @Override
    public ConnectorTableMetadata getTableMetadata(ConnectorSession session, ConnectorTableHandle handle) {
        SluiceTableHandle h = (SluiceTableHandle) handle;
        List<ColumnMetadata> cols = new ArrayList<>();
        for (SluiceColumnHandle c : columns(h.table()).values()) {
            cols.add(c.metadata());
        }
        return new ConnectorTableMetadata(new SchemaTableName(SCHEMA, h.table()), cols);
    }

    @Override
    public List<SchemaTableName> listTables(ConnectorSession session, Optional<String> schema) {
        if (schema.isPresent() && !schema.get().equals(SCHEMA)) {
            return List.of();
        }
        List<SchemaTableName> out = new ArrayList<>();
        for (String t : client.tableNames()) {
            out.add(new SchemaTableName(SCHEMA, t));
        }
        return out;
    }

    @Override
    public Map<String, ColumnHandle> getColumnHandles(ConnectorSession session, ConnectorTableHandle handle) {
        return new LinkedHashMap<>(columns(((SluiceTableHandle) handle).table()));
    }

    @Override
    public ColumnMetadata getColumnMetadata(ConnectorSession session, ConnectorTableHandle table, ColumnHandle column) {
        return ((SluiceColumnHandle) column).metadata();
    }

    private Map<String, SluiceColumnHandle> columns(String table) {
        SluiceClient.Table t = client.table(table);
        if (t == null) {
            throw new IllegalStateException("sluice table " + table + " is gone");
        }
        Map<String, SluiceColumnHandle> out = new LinkedHashMap<>();
        for (SluiceClient.Column c : t.columns()) {
            out.put(c.name(), new SluiceColumnHandle(c.name(), c.type()));
        }
        return out;
    }

    /**
     * Pushes the sortBy range and the hashBy values down to the nodes. Trino keeps the whole constraint and applies
     * it to what comes back, so what is pushed down needs only to be wide enough.
     */
    @Override
    public Optional<ConstraintApplicationResult<ConnectorTableHandle>> applyFilter(ConnectorSession session, ConnectorTableHandle handle, Constraint constraint) {
        SluiceTableHandle h = (SluiceTableHandle) handle;
        Optional<Map<ColumnHandle, Domain>> domains = constraint.getSummary().getDomains();
        if (domains.isEmpty()) {
            return Optional.empty();
        }
        String from = h.from();
        String to = h.to();
        List<String> hashes = h.hashes();
        for (Map.Entry<ColumnHandle, Domain> e : domains.get().entrySet()) {
            SluiceColumnHandle c = (SluiceColumnHandle) e.getKey();
            Domain d = e.getValue();
            if (d.isNullAllowed() || d.getValues().isAll() || d.getValues().isNone()) {
                continue;
            }
            if (c.name().equals(h.sortBy()) && c.sluiceType().equals("timestamp")) {
                Range span = d.getValues().getRanges().getSpan();
                if (!span.isLowUnbounded()) {
                    from = rfc3339((LongTimestampWithTimeZone) span.getLowBoundedValue(), 0);
                }
                if (!span.isHighUnbounded()) {
                    // sluice's to is exclusive: one microsecond past an inclusive bound.
                    to = rfc3339((LongTimestampWithTimeZone) span.getHighBoundedValue(), span.isHighInclusive() ? 1 : 0);
                }
            }
            else if (c.name().equals(h.hashBy()) && d.getValues().isDiscreteSet() && hashes.isEmpty()) {
                List<String> values = new ArrayList<>();
                for (Object v : d.getValues().getDiscreteSet()) {
                    values.add(v instanceof Slice s ? s.toStringUtf8() : String.valueOf(v));
                }
                hashes = values;
            }
        }
        SluiceTableHandle pushed = new SluiceTableHandle(h.table(), h.hashBy(), h.sortBy(), from, to, hashes);
        if (pushed.equals(h)) {
            return Optional.empty();
        }
        return Optional.of(new ConstraintApplicationResult<>(pushed, constraint.getSummary(), constraint.getExpression(), false));
    }

    private static String rfc3339(LongTimestampWithTimeZone t, long plusMicros) {
        long micros = Math.addExact(Math.multiplyExact(t.getEpochMillis(), 1000L), t.getPicosOfMilli() / 1_000_000L) + plusMicros;
        return Instant.ofEpochSecond(Math.floorDiv(micros, 1_000_000L), Math.floorMod(micros, 1_000_000L) * 1000L).toString();
    }
}
