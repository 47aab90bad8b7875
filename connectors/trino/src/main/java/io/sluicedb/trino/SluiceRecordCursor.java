package io.sluicedb.trino;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.airlift.slice.Slices;
import io.trino.spi.TrinoException;
import io.trino.spi.connector.RecordCursor;
import io.trino.spi.type.LongTimestampWithTimeZone;
import io.trino.spi.type.TimeZoneKey;
import io.trino.spi.type.DecimalType;
import io.trino.spi.type.Int128;
import io.trino.spi.type.Type;
import io.trino.spi.type.UuidType;

import java.io.IOException;
import java.io.InputStream;
import java.math.BigDecimal;
import java.math.RoundingMode;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalTime;
import java.time.OffsetDateTime;
import java.time.format.DateTimeParseException;
import java.util.UUID;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import static io.sluicedb.trino.SluiceErrorCode.SLUICE_BAD_ANSWER;
import static io.sluicedb.trino.SluiceErrorCode.SLUICE_LEASE_EXPIRED;
import static io.sluicedb.trino.SluiceErrorCode.SLUICE_NODE_ERROR;

/**
 * Walks a node's NDJSON answer with Jackson's streaming parser: one token pass per row, values kept in arrays by
 * column, no tree or map per row. The native types come as sluice writes them: a date "2026-11-29", a time of day
 * "13:45:01.000123", a uuid its text, bytes base64, a decimal an exact JSON number. A last line {"error": ...} (a node's query that failed after its first row) fails
 * the split with the node's message.
 */
final class SluiceRecordCursor implements RecordCursor {
    private static final JsonFactory JSON = new ObjectMapper().getFactory();
    // How a node's error line begins when the read lease it reads under ended (server/lease.go's errLeaseEnded).
    private static final String LEASE_ENDED = "read lease ended";

    private final String node;
    private final List<SluiceColumnHandle> columns;
    private final Map<String, Integer> index = new HashMap<>();
    private final InputStream body;
    private final JsonParser parser;
    private final Object[] values;
    private final long[] longs;
    private final double[] doubles;
    private final boolean[] nulls;
    // A decimal column's scale, -1 for the other columns, and whether it is a long decimal (an Int128): found once,
    // not per value.
    private final int[] decimalScale;
    private final boolean[] longDecimal;
    private final Runnable onClose;
    private boolean closed;
    private long rows;

    SluiceRecordCursor(String node, List<SluiceColumnHandle> columns, InputStream body, Runnable onClose) {
        this.node = node;
        this.onClose = onClose;
        this.columns = columns;
        for (int i = 0; i < columns.size(); i++) {
            index.put(columns.get(i).name(), i);
        }
        this.body = body;
        try {
            this.parser = JSON.createParser(body);
        }
        catch (IOException e) {
            throw fail(e);
        }
        int n = columns.size();
        values = new Object[n];
        longs = new long[n];
        doubles = new double[n];
        nulls = new boolean[n];
        decimalScale = new int[n];
        longDecimal = new boolean[n];
        for (int i = 0; i < n; i++) {
            decimalScale[i] = columns.get(i).decimal().map(DecimalType::getScale).orElse(-1);
            longDecimal[i] = columns.get(i).decimal().map(d -> !d.isShort()).orElse(false);
        }
    }

    @Override
    public boolean advanceNextPosition() {
        try {
            JsonToken tok = parser.nextToken();
            if (tok == null) {
                return false;
            }
            if (tok != JsonToken.START_OBJECT) {
                throw new TrinoException(SLUICE_BAD_ANSWER, "sluice node " + node + ": row " + rows + ": not a JSON object");
            }
            java.util.Arrays.fill(nulls, true);
            String error = null;
            int fields = 0;
            while ((tok = parser.nextToken()) == JsonToken.FIELD_NAME) {
                String name = parser.currentName();
                tok = parser.nextToken();
                fields++;
                Integer i = index.get(name);
                if (i == null) {
                    if (name.equals("error") && tok == JsonToken.VALUE_STRING) {
                        error = parser.getText();
                    }
                    else {
                        parser.skipChildren();
                    }
                    continue;
                }
                read(i, tok);
            }
            if (error != null && fields == 1) {
                // A node whose lease ends mid-read (its TTL fired) says so in its last line, as its 410 says it later.
                SluiceErrorCode code = error.startsWith(LEASE_ENDED) ? SLUICE_LEASE_EXPIRED : SLUICE_NODE_ERROR;
                throw new TrinoException(code, "sluice node " + node + ": the query failed after " + rows + " rows: " + error);
            }
            rows++;
            return true;
        }
        catch (IOException e) {
            throw fail(e);
        }
    }

    private void read(int i, JsonToken tok) throws IOException {
        if (tok == JsonToken.VALUE_NULL) {
            return;
        }
        nulls[i] = false;
        switch (columns.get(i).sluiceType()) {
            case "int64", "int32" -> longs[i] = parser.getLongValue();
            case "float64" -> doubles[i] = parser.getDoubleValue();
            case "bool" -> longs[i] = tok == JsonToken.VALUE_TRUE ? 1 : 0;
            case "timestamp" -> values[i] = timestamp(parser.getText());
            case "json" -> {
                if (tok == JsonToken.START_OBJECT || tok == JsonToken.START_ARRAY) {
                    values[i] = Slices.utf8Slice(parser.readValueAsTree().toString());
                }
                else {
                    values[i] = Slices.utf8Slice(parser.getText());
                }
            }
            case "date" -> longs[i] = parse(i, () -> LocalDate.parse(parser.getText()).toEpochDay());
            // Trino's TIME holds picoseconds of the day.
            case "time_of_day" -> longs[i] = parse(i, () -> LocalTime.parse(parser.getText()).toNanoOfDay() * 1000L);
            case "uuid" -> values[i] = parse(i, () -> UuidType.javaUuidToTrinoUuid(UUID.fromString(parser.getText())));
            case "bytes" -> values[i] = Slices.wrappedBuffer(parser.getBinaryValue());
            default -> {
                if (decimalScale[i] >= 0) {
                    // The exact number at the column's scale: a value with more digits is a broken answer, not one
                    // to round.
                    if (longDecimal[i]) {
                        values[i] = parse(i, () -> Int128.valueOf(new BigDecimal(parser.getText()).setScale(decimalScale[i], RoundingMode.UNNECESSARY).unscaledValue()));
                    }
                    else {
                        longs[i] = parse(i, () -> new BigDecimal(parser.getText()).setScale(decimalScale[i], RoundingMode.UNNECESSARY).unscaledValue().longValueExact());
                    }
                }
                else {
                    values[i] = Slices.utf8Slice(parser.getText());
                }
            }
        }
    }

    private interface Parse<T> {
        T get() throws IOException;
    }

    /** A value parsed by p, or a bad-answer error naming the column and row when its text is not one. */
    private <T> T parse(int column, Parse<T> p) throws IOException {
        try {
            return p.get();
        }
        catch (DateTimeParseException | IllegalArgumentException | ArithmeticException e) {
            SluiceColumnHandle c = columns.get(column);
            throw new TrinoException(SLUICE_BAD_ANSWER, "sluice node " + node + ": row " + rows + ": column " + c.name() + " (" + c.sluiceType() + "): " + parser.getText() + ": " + e.getMessage(), e);
        }
    }

    private static LongTimestampWithTimeZone timestamp(String s) {
        Instant t;
        try {
            t = Instant.parse(s);
        }
        catch (RuntimeException e) {
            t = OffsetDateTime.parse(s).toInstant();
        }
        long micros = t.getNano() / 1000L;
        long millis = Math.addExact(Math.multiplyExact(t.getEpochSecond(), 1000L), micros / 1000L);
        int picosOfMilli = (int) ((micros % 1000L) * 1_000_000L);
        return LongTimestampWithTimeZone.fromEpochMillisAndFraction(millis, picosOfMilli, TimeZoneKey.UTC_KEY);
    }

    private TrinoException fail(IOException e) {
        return new TrinoException(SLUICE_NODE_ERROR, "sluice node " + node + ": reading its answer after " + rows + " rows: " + e.getMessage(), e);
    }

    @Override
    public long getCompletedBytes() {
        return parser.currentLocation().getByteOffset();
    }

    @Override
    public long getReadTimeNanos() {
        return 0;
    }

    @Override
    public Type getType(int field) {
        return columns.get(field).trinoType();
    }

    @Override
    public boolean getBoolean(int field) {
        return longs[field] != 0;
    }

    @Override
    public long getLong(int field) {
        return longs[field];
    }

    @Override
    public double getDouble(int field) {
        return doubles[field];
    }

    @Override
    public io.airlift.slice.Slice getSlice(int field) {
        return (io.airlift.slice.Slice) values[field];
    }

    @Override
    public Object getObject(int field) {
        return values[field];
    }

    @Override
    public boolean isNull(int field) {
        return nulls[field];
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        onClose.run();
        try {
            parser.close();
            body.close();
        }
        catch (IOException e) {
            // the split is done; nothing to keep
        }
    }
}
