package io.sluicedb.trino;

import com.google.flatbuffers.FlatBufferBuilder;
import io.airlift.slice.Slices;
import io.trino.spi.TrinoException;
import io.trino.spi.block.Block;
import io.trino.spi.connector.SourcePage;
import io.trino.spi.type.DecimalType;
import io.trino.spi.type.Type;
import org.apache.arrow.flatbuf.Buffer;
import org.apache.arrow.flatbuf.FieldNode;
import org.apache.arrow.flatbuf.Message;
import org.apache.arrow.flatbuf.MessageHeader;
import org.apache.arrow.flatbuf.MetadataVersion;
import org.apache.arrow.flatbuf.RecordBatch;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.time.LocalDate;
import java.time.LocalTime;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;

import static io.sluicedb.trino.SluiceErrorCode.SLUICE_BAD_ANSWER;
import static io.trino.spi.type.BigintType.BIGINT;
import static io.trino.spi.type.BooleanType.BOOLEAN;
import static io.trino.spi.type.DateType.DATE;
import static io.trino.spi.type.DoubleType.DOUBLE;
import static io.trino.spi.type.TimeType.TIME_MICROS;
import static io.trino.spi.type.TimestampWithTimeZoneType.TIMESTAMP_TZ_MICROS;
import static io.trino.spi.type.UuidType.UUID;
import static io.trino.spi.type.UuidType.javaUuidToTrinoUuid;
import static io.trino.spi.type.UuidType.trinoUuidToJavaUuid;
import static io.trino.spi.type.VarbinaryType.VARBINARY;
import static io.trino.spi.type.VarcharType.VARCHAR;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * sluice's column types as Trino's (the ones Trino's Iceberg connector gives the Iceberg types sluice commits), and
 * the native types' values read from an Arrow answer and from an NDJSON one.
 */
@Timeout(60)
class TestSluiceTypes {
    private static final List<SluiceColumnHandle> NATIVE = List.of(
            new SluiceColumnHandle("d", "date"),
            new SluiceColumnHandle("tod", "time_of_day"),
            new SluiceColumnHandle("u", "uuid"),
            new SluiceColumnHandle("b", "bytes"),
            new SluiceColumnHandle("amount", "decimal(10,2)"));

    // Two rows of the native columns: the values of the first, then the second's.
    private static final LocalDate[] DATES = {LocalDate.of(2026, 11, 29), LocalDate.of(1969, 12, 31)};
    private static final LocalTime[] TIMES = {LocalTime.parse("13:45:01.000123"), LocalTime.MIDNIGHT};
    private static final UUID[] UUIDS = {java.util.UUID.fromString("123e4567-e89b-12d3-a456-426614174000"), java.util.UUID.fromString("ff000000-0000-0000-0000-0000000000fe")};
    private static final byte[][] BYTES = {{0, 1, 2, (byte) 0xFF}, {}};
    private static final long[] CENTS = {1250, -1};

    @Test
    void trinoTypes() {
        String[][] cases = {
                {"int64", "bigint"}, {"int32", "bigint"}, {"float64", "double"}, {"bool", "boolean"},
                {"timestamp", "timestamp(6) with time zone"}, {"string", "varchar"}, {"json", "varchar"},
                {"date", "date"}, {"time_of_day", "time(6)"}, {"uuid", "uuid"}, {"bytes", "varbinary"},
                {"decimal(10,2)", "decimal(10,2)"}, {"decimal(18,0)", "decimal(18,0)"}, {"decimal(1,1)", "decimal(1,1)"},
                {"decimal(19,2)", "decimal(19,2)"}, {"decimal(38,10)", "decimal(38,10)"},
        };
        for (String[] c : cases) {
            assertEquals(c[1], new SluiceColumnHandle("c", c[0]).trinoType().getDisplayName(), c[0]);
        }
        assertEquals(List.of(BIGINT, DOUBLE, BOOLEAN, TIMESTAMP_TZ_MICROS, VARCHAR, DATE, TIME_MICROS, UUID, VARBINARY),
                List.of("int64", "float64", "bool", "timestamp", "string", "date", "time_of_day", "uuid", "bytes").stream()
                        .map(t -> new SluiceColumnHandle("c", t).trinoType()).toList());
        DecimalType d = (DecimalType) new SluiceColumnHandle("c", "decimal(10,2)").trinoType();
        assertTrue(d.isShort());
        // Over 18 digits sluice holds 128 bits: Trino's long decimal.
        assertFalse(((DecimalType) new SluiceColumnHandle("c", "decimal(19,2)").trinoType()).isShort());
        // A decimal sluice cannot hold (over 38 digits) is refused, not read into the wrong block.
        for (String bad : List.of("decimal(39,2)", "decimal(4,5)", "decimal(0,0)")) {
            TrinoException e = assertThrows(TrinoException.class, () -> new SluiceColumnHandle("c", bad).trinoType(), bad);
            assertEquals(SLUICE_BAD_ANSWER.toErrorCode(), e.getErrorCode());
        }
    }

    /** Checks row i (0 or 1) of the native columns' blocks against the values the answer holds. */
    private static void checkRow(List<Block> blocks, int i) {
        List<Type> types = NATIVE.stream().map(SluiceColumnHandle::trinoType).toList();
        assertEquals(DATES[i].toEpochDay(), types.get(0).getLong(blocks.get(0), i), "date");
        assertEquals(TIMES[i].toNanoOfDay() * 1000L, types.get(1).getLong(blocks.get(1), i), "time (picoseconds)");
        assertEquals(UUIDS[i], trinoUuidToJavaUuid(types.get(2).getSlice(blocks.get(2), i)), "uuid");
        assertEquals(javaUuidToTrinoUuid(UUIDS[i]), types.get(2).getSlice(blocks.get(2), i), "uuid slice");
        assertArrayEquals(BYTES[i], types.get(3).getSlice(blocks.get(3), i).getBytes(), "bytes");
        assertEquals(CENTS[i], types.get(4).getLong(blocks.get(4), i), "decimal");
    }

    @Test
    void ndjsonNativeValues() {
        String answer = "{\"d\":\"2026-11-29\",\"tod\":\"13:45:01.000123\",\"u\":\"123e4567-e89b-12d3-a456-426614174000\",\"b\":\"AAEC/w==\",\"amount\":12.5}\n"
                + "{\"d\":\"1969-12-31\",\"tod\":\"00:00:00.000000\",\"u\":\"ff000000-0000-0000-0000-0000000000fe\",\"b\":\"\",\"amount\":-0.01}\n"
                + "{\"d\":null,\"tod\":null,\"u\":null,\"b\":null,\"amount\":null}\n";
        SluiceRecordCursor cursor = new SluiceRecordCursor("http://node-a:8080", NATIVE, new ByteArrayInputStream(answer.getBytes(StandardCharsets.UTF_8)), () -> {});
        for (int i = 0; i < 2; i++) {
            assertTrue(cursor.advanceNextPosition());
            for (int c = 0; c < NATIVE.size(); c++) {
                assertFalse(cursor.isNull(c));
            }
            assertEquals(DATES[i].toEpochDay(), cursor.getLong(0));
            assertEquals(TIMES[i].toNanoOfDay() * 1000L, cursor.getLong(1));
            assertEquals(javaUuidToTrinoUuid(UUIDS[i]), cursor.getSlice(2));
            assertEquals(Slices.wrappedBuffer(BYTES[i]), cursor.getSlice(3));
            assertEquals(CENTS[i], cursor.getLong(4));
        }
        assertTrue(cursor.advanceNextPosition());
        for (int c = 0; c < NATIVE.size(); c++) {
            assertTrue(cursor.isNull(c));
        }
        assertFalse(cursor.advanceNextPosition());
        cursor.close();
    }

    /** A decimal with more digits than its column's scale is a broken answer, not one to round. */
    @Test
    void ndjsonDecimalPastItsScale() {
        String answer = "{\"amount\":12.345}\n";
        SluiceRecordCursor cursor = new SluiceRecordCursor("http://node-a:8080", List.of(NATIVE.get(4)), new ByteArrayInputStream(answer.getBytes(StandardCharsets.UTF_8)), () -> {});
        TrinoException e = assertThrows(TrinoException.class, cursor::advanceNextPosition);
        assertEquals(SLUICE_BAD_ANSWER.toErrorCode(), e.getErrorCode(), e.getMessage());
        assertTrue(e.getMessage().contains("amount"), e.getMessage());
        cursor.close();
    }

    @Test
    void arrowNativeValues() {
        int rows = 2;
        List<long[]> nodes = new ArrayList<>();
        List<byte[]> buffers = new ArrayList<>();
        ByteBuffer b;
        // date32: no validity bitmap (no nulls), then days.
        nodes.add(new long[] {rows, 0});
        buffers.add(new byte[0]);
        b = le(rows * 4);
        for (LocalDate d : DATES) {
            b.putInt(Math.toIntExact(d.toEpochDay()));
        }
        buffers.add(b.array());
        // time64[us]
        nodes.add(new long[] {rows, 0});
        buffers.add(new byte[0]);
        b = le(rows * 8);
        for (LocalTime t : TIMES) {
            b.putLong(t.toNanoOfDay() / 1000L);
        }
        buffers.add(b.array());
        // fixed_size_binary[16]: the uuid's bytes in text order.
        nodes.add(new long[] {rows, 0});
        buffers.add(new byte[0]);
        b = ByteBuffer.allocate(rows * 16).order(ByteOrder.BIG_ENDIAN);
        for (UUID u : UUIDS) {
            b.putLong(u.getMostSignificantBits()).putLong(u.getLeastSignificantBits());
        }
        buffers.add(b.array());
        // binary: offsets, then the bytes.
        nodes.add(new long[] {rows, 0});
        buffers.add(new byte[0]);
        b = le((rows + 1) * 4);
        ByteArrayOutputStream data = new ByteArrayOutputStream();
        b.putInt(0);
        for (byte[] x : BYTES) {
            data.writeBytes(x);
            b.putInt(data.size());
        }
        buffers.add(b.array());
        buffers.add(data.toByteArray());
        // decimal128: 16 little-endian bytes, the high 8 the sign's extension.
        nodes.add(new long[] {rows, 0});
        buffers.add(new byte[0]);
        b = le(rows * 16);
        for (long c : CENTS) {
            b.putLong(c).putLong(c < 0 ? -1 : 0);
        }
        buffers.add(b.array());

        SluiceArrowPageSource pages = new SluiceArrowPageSource("http://node-a:8080", NATIVE, NATIVE.size(), new ByteArrayInputStream(arrowStream(rows, nodes, buffers)), () -> {});
        SourcePage page = pages.getNextSourcePage();
        assertEquals(rows, page.getPositionCount());
        List<Block> blocks = new ArrayList<>();
        for (int c = 0; c < NATIVE.size(); c++) {
            blocks.add(page.getBlock(c));
        }
        for (int i = 0; i < rows; i++) {
            checkRow(blocks, i);
        }
        assertNull(pages.getNextSourcePage());
        assertTrue(pages.isFinished());
    }

    /** A row with nulls in every native column: Arrow's validity bitmaps become the blocks' nulls. */
    @Test
    void arrowNativeNulls() {
        int rows = 2;
        List<long[]> nodes = new ArrayList<>();
        List<byte[]> buffers = new ArrayList<>();
        int[] widths = {4, 8, 16, -1, 16};
        for (int width : widths) {
            nodes.add(new long[] {rows, 1});
            buffers.add(new byte[] {1, 0, 0, 0, 0, 0, 0, 0}); // row 0 a value, row 1 null
            if (width < 0) {
                buffers.add(new byte[(rows + 1) * 4]);
                buffers.add(new byte[0]);
            }
            else {
                buffers.add(new byte[rows * width]);
            }
        }
        SluiceArrowPageSource pages = new SluiceArrowPageSource("http://node-a:8080", NATIVE, NATIVE.size(), new ByteArrayInputStream(arrowStream(rows, nodes, buffers)), () -> {});
        SourcePage page = pages.getNextSourcePage();
        for (int c = 0; c < NATIVE.size(); c++) {
            assertFalse(page.getBlock(c).isNull(0), NATIVE.get(c).name());
            assertTrue(page.getBlock(c).isNull(1), NATIVE.get(c).name());
        }
    }

    private static ByteBuffer le(int size) {
        return ByteBuffer.allocate(size).order(ByteOrder.LITTLE_ENDIAN);
    }

    /** An Arrow IPC stream of one record batch (nodes: length and null count a column) and the end marker. */
    private static byte[] arrowStream(int rows, List<long[]> nodes, List<byte[]> buffers) {
        ByteArrayOutputStream body = new ByteArrayOutputStream();
        long[][] spans = new long[buffers.size()][];
        for (int i = 0; i < buffers.size(); i++) {
            spans[i] = new long[] {body.size(), buffers.get(i).length};
            body.writeBytes(buffers.get(i));
            body.writeBytes(new byte[(8 - body.size() % 8) % 8]);
        }
        FlatBufferBuilder fb = new FlatBufferBuilder();
        RecordBatch.startNodesVector(fb, nodes.size());
        for (int i = nodes.size() - 1; i >= 0; i--) {
            FieldNode.createFieldNode(fb, nodes.get(i)[0], nodes.get(i)[1]);
        }
        int nodesVector = fb.endVector();
        RecordBatch.startBuffersVector(fb, spans.length);
        for (int i = spans.length - 1; i >= 0; i--) {
            Buffer.createBuffer(fb, spans[i][0], spans[i][1]);
        }
        int buffersVector = fb.endVector();
        RecordBatch.startRecordBatch(fb);
        RecordBatch.addLength(fb, rows);
        RecordBatch.addNodes(fb, nodesVector);
        RecordBatch.addBuffers(fb, buffersVector);
        int batch = RecordBatch.endRecordBatch(fb);
        fb.finish(Message.createMessage(fb, MetadataVersion.V5, MessageHeader.RecordBatch, batch, body.size(), 0));
        byte[] meta = fb.sizedByteArray();
        int padded = (meta.length + 7) / 8 * 8;
        ByteBuffer out = le(8 + padded + body.size() + 8);
        out.putInt(0xFFFFFFFF).putInt(padded).put(meta).position(8 + padded);
        out.put(body.toByteArray());
        out.putInt(0xFFFFFFFF).putInt(0);
        return out.array();
    }
}
