package io.sluicedb.trino;

import io.airlift.slice.Slice;
import io.trino.spi.TrinoException;
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
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import static io.sluicedb.trino.SluiceErrorCode.SLUICE_NODE_ERROR;

/**
 * The catalog's one schema, "cluster", holds the node's tables. One instance serves one transaction (a statement)
 * and asks the node about each table, and for the list of tables, at most once: Trino asks for a table's handle, its
 * columns and its metadata many times while it plans, and one statement should see one schema however a node's
 * tables change meanwhile.
 */
public final class SluiceMetadata implements ConnectorMetadata {
    public static final String SCHEMA = "cluster";

    private final SluiceClient client;
    private final SluiceLeases leases;

    // Guarded by this: Trino may call a transaction's metadata from more than one thread.
    private List<String> tableNames;
    private final Map<String, Optional<SluiceClient.Table>> tables = new HashMap<>();

    SluiceMetadata(SluiceClient client, SluiceLeases leases) {
        this.client = client;
        this.leases = leases;
    }

    /** The node's table, asked for once in the transaction (its absence too). */
    private synchronized Optional<SluiceClient.Table> table(String name) {
        Optional<SluiceClient.Table> t = tables.get(name);
        if (t == null) {
            t = client.table(name);
            tables.put(name, t);
        }
        return t;
    }

    private synchronized List<String> tableNames() {
        if (tableNames == null) {
            tableNames = List.copyOf(client.tableNames());
        }
        return tableNames;
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
        Optional<SluiceClient.Table> found = table(name.getTableName());
        if (found.isEmpty()) {
            return null;
        }
        SluiceClient.Table t = found.get();
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
        for (String t : tableNames()) {
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
        // A handle made in another transaction (or a table dropped between two statements) may name a table the
        // node no longer has.
        SluiceClient.Table t = table(table).orElseThrow(() -> new TrinoException(SLUICE_NODE_ERROR, "sluice table " + table + " is gone from the node"));
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
            else if (c.name().equals(h.hashBy()) && d.getValues().isDiscreteSet() && hashes.isEmpty() && hashText(c)) {
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

    /**
     * Whether a hashBy value is sent as Trino's value's text: a date, time, uuid, bytes or decimal value is held in a
     * form (days, picoseconds, raw bytes, an unscaled long) whose text is not the value's, so it is not pushed down
     * (Trino still filters the rows).
     */
    private static boolean hashText(SluiceColumnHandle c) {
        return switch (c.sluiceType()) {
            case "date", "time_of_day", "uuid", "bytes" -> false;
            default -> c.decimal().isEmpty();
        };
    }

    private static String rfc3339(LongTimestampWithTimeZone t, long plusMicros) {
        long micros = Math.addExact(Math.multiplyExact(t.getEpochMillis(), 1000L), t.getPicosOfMilli() / 1_000_000L) + plusMicros;
        return Instant.ofEpochSecond(Math.floorDiv(micros, 1_000_000L), Math.floorMod(micros, 1_000_000L) * 1000L).toString();
    }
}
