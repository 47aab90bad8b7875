package io.sluicedb.trino;

import io.airlift.slice.Slices;
import io.trino.spi.TrinoException;
import io.trino.spi.block.Block;
import io.trino.spi.block.ByteArrayBlock;
import io.trino.spi.block.Fixed12Block;
import io.trino.spi.block.Int128ArrayBlock;
import io.trino.spi.block.IntArrayBlock;
import io.trino.spi.block.LongArrayBlock;
import io.trino.spi.block.VariableWidthBlock;
import io.trino.spi.connector.ConnectorPageSource;
import io.trino.spi.connector.SourcePage;
import io.trino.spi.type.DateTimeEncoding;
import io.trino.spi.type.TimeZoneKey;
import org.apache.arrow.flatbuf.Buffer;
import org.apache.arrow.flatbuf.FieldNode;
import org.apache.arrow.flatbuf.Message;
import org.apache.arrow.flatbuf.MessageHeader;
import org.apache.arrow.flatbuf.RecordBatch;

import java.io.BufferedInputStream;
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import java.util.Optional;

import static io.sluicedb.trino.SluiceErrorCode.SLUICE_BAD_ANSWER;
import static io.sluicedb.trino.SluiceErrorCode.SLUICE_NODE_ERROR;

/**
 * Reads a node's answer in Arrow IPC stream format (format=arrow: int64, float64, bool, utf8, timestamp[ns, UTC],
 * date32, time64[us], decimal128(p,s), binary and fixed_size_binary[16] (uuid) columns, uncompressed, 65,536 rows a
 * batch) straight into Trino blocks: the batch's body is read into one array and
 * every column becomes a block over it (strings share it; numbers are copied once in bulk), with no per-row call.
 * Only Arrow's flatbuffer message classes (arrow-format) are used, not Arrow's vectors and allocators, which need
 * extra JVM flags (--add-opens) that a plugin cannot set.
 *
 * <p>A node that fails mid-answer under a lease breaks its HTTP stream rather than end it: the stream is read to its
 * end after Arrow's end-of-stream marker, so a broken one fails the split.
 */
final class SluiceArrowPageSource implements ConnectorPageSource {
    private static final int CONTINUATION = 0xFFFFFFFF;
    // A message's metadata (a schema or a batch's buffer list) is small; a larger length means the body is not an
    // Arrow stream (a proxy's HTML page, say), and allocating it could take the worker's heap.
    private static final int MAX_METADATA = 16 << 20;

    private final String node;
    private final List<SluiceColumnHandle> columns;
    private final int wireColumns;
    private final InputStream body;
    private final DataInputStream in;
    private final Runnable onClose;
    private long bytes;
    private long positions;
    private long readNanos;
    private boolean finished;
    private boolean closed;

    /**
     * wireColumns is how many columns the node sends (columns, or one when columns is empty: count(*) reads the sort
     * column's batches only for their lengths).
     */
    SluiceArrowPageSource(String node, List<SluiceColumnHandle> columns, int wireColumns, InputStream body, Runnable onClose) {
        this.node = node;
        this.columns = columns;
        this.wireColumns = wireColumns;
        this.body = body;
        this.in = new DataInputStream(new BufferedInputStream(body, 64 << 10));
        this.onClose = onClose;
    }

    @Override
    public SourcePage getNextSourcePage() {
        if (finished) {
            return null;
        }
        long start = System.nanoTime();
        try {
            while (true) {
                ByteBuffer meta = readMessage();
                if (meta == null) {
                    drain();
                    finished = true;
                    return null;
                }
                Message m = Message.getRootAsMessage(meta);
                if (m.headerType() == MessageHeader.Schema) {
                    skip(m.bodyLength());
                    continue;
                }
                if (m.headerType() != MessageHeader.RecordBatch) {
                    throw new TrinoException(SLUICE_BAD_ANSWER, "sluice node " + node + ": Arrow message type " + m.headerType() + " (want a record batch)");
                }
                RecordBatch batch = (RecordBatch) m.header(new RecordBatch());
                byte[] data = new byte[Math.toIntExact(m.bodyLength())];
                in.readFully(data);
                bytes += data.length;
                SourcePage page = page(batch, data);
                positions += page.getPositionCount();
                return page;
            }
        }
        catch (IOException e) {
            throw new TrinoException(SLUICE_NODE_ERROR, "sluice node " + node + ": reading its Arrow answer after " + positions + " rows: " + e, e);
        }
        finally {
            readNanos += System.nanoTime() - start;
        }
    }

    /** The next message's metadata, or null at the end-of-stream marker. */
    private ByteBuffer readMessage() throws IOException {
        int len = Integer.reverseBytes(in.readInt());
        if (len == CONTINUATION) {
            len = Integer.reverseBytes(in.readInt());
        }
        if (len == 0) {
            return null;
        }
        if (len < 0 || len > MAX_METADATA) {
            throw new TrinoException(SLUICE_BAD_ANSWER, "sluice node " + node + ": not an Arrow stream (a message of " + Integer.toUnsignedString(len) + " bytes of metadata)");
        }
        byte[] meta = new byte[len];
        in.readFully(meta);
        bytes += 8 + len;
        return ByteBuffer.wrap(meta).order(ByteOrder.LITTLE_ENDIAN);
    }

    /** Reads past the end-of-stream marker to the HTTP body's end: a broken body (a node that failed) throws. */
    private void drain() throws IOException {
        if (in.read() != -1) {
            throw new IOException("bytes after the end-of-stream marker");
        }
    }

    private void skip(long n) throws IOException {
        while (n > 0) {
            long k = in.skip(n);
            if (k <= 0) {
                throw new EOFException();
            }
            n -= k;
        }
    }

    private SourcePage page(RecordBatch batch, byte[] data) {
        if (batch.compression() != null) {
            throw new TrinoException(SLUICE_BAD_ANSWER, "sluice node " + node + ": a compressed Arrow batch (the connector reads uncompressed ones)");
        }
        int rows = Math.toIntExact(batch.length());
        if (batch.nodesLength() != wireColumns) {
            throw new TrinoException(SLUICE_BAD_ANSWER, "sluice node " + node + ": an Arrow batch of " + batch.nodesLength() + " columns, want " + wireColumns);
        }
        if (columns.isEmpty()) {
            return SourcePage.create(rows);
        }
        ByteBuffer buf = ByteBuffer.wrap(data).order(ByteOrder.LITTLE_ENDIAN);
        Block[] blocks = new Block[columns.size()];
        FieldNode fn = new FieldNode();
        Buffer b = new Buffer();
        int bufferIndex = 0;
        for (int c = 0; c < blocks.length; c++) {
            SluiceColumnHandle column = columns.get(c);
            batch.nodes(fn, c);
            Optional<boolean[]> nulls = fn.nullCount() == 0 ? Optional.empty() : Optional.of(nulls(buf, batch.buffers(b, bufferIndex), rows));
            bufferIndex++;
            String type = column.sluiceType();
            if (column.decimal().isPresent()) {
                type = column.decimal().get().isShort() ? "decimal" : "long decimal";
            }
            batch.buffers(b, bufferIndex++);
            int offset = Math.toIntExact(b.offset());
            blocks[c] = switch (type) {
                case "int64", "int32", "float64" -> {
                    // DOUBLE's blocks hold the value's bits as a long, as Arrow's buffer does.
                    long[] values = new long[rows];
                    buf.slice(offset, rows * 8).order(ByteOrder.LITTLE_ENDIAN).asLongBuffer().get(values);
                    yield new LongArrayBlock(rows, nulls, values);
                }
                case "bool" -> {
                    byte[] values = new byte[rows];
                    for (int i = 0; i < rows; i++) {
                        values[i] = (byte) ((data[offset + (i >> 3)] >> (i & 7)) & 1);
                    }
                    yield new ByteArrayBlock(rows, nulls, values);
                }
                case "timestamp" -> {
                    int[] values = new int[rows * 3];
                    for (int i = 0; i < rows; i++) {
                        long ns = buf.getLong(offset + i * 8);
                        long millis = Math.floorDiv(ns, 1_000_000L);
                        int picosOfMilli = (int) (Math.floorMod(ns, 1_000_000L) / 1000L) * 1_000_000;
                        Fixed12Block.encodeFixed12(DateTimeEncoding.packDateTimeWithZone(millis, TimeZoneKey.UTC_KEY), picosOfMilli, values, i);
                    }
                    yield new Fixed12Block(rows, nulls, values);
                }
                case "date" -> {
                    // date32 is days since 1970-01-01, as Trino's DATE.
                    int[] values = new int[rows];
                    buf.slice(offset, rows * 4).order(ByteOrder.LITTLE_ENDIAN).asIntBuffer().get(values);
                    yield new IntArrayBlock(rows, nulls, values);
                }
                case "time_of_day" -> {
                    // time64[us] is microseconds since midnight; Trino's TIME holds picoseconds.
                    long[] values = new long[rows];
                    for (int i = 0; i < rows; i++) {
                        values[i] = buf.getLong(offset + i * 8) * 1_000_000L;
                    }
                    yield new LongArrayBlock(rows, nulls, values);
                }
                case "decimal" -> {
                    // decimal128 is 16 little-endian bytes a value; a short decimal (p <= 18) is its low 8 bytes,
                    // the high 8 only its sign's extension.
                    long[] values = new long[rows];
                    for (int i = 0; i < rows; i++) {
                        values[i] = buf.getLong(offset + i * 16);
                    }
                    yield new LongArrayBlock(rows, nulls, values);
                }
                case "long decimal" -> {
                    // Trino's long decimal block holds each Int128 as its high then its low long; decimal128 holds
                    // the low 8 bytes first.
                    long[] values = new long[rows * 2];
                    for (int i = 0; i < rows; i++) {
                        values[2 * i] = buf.getLong(offset + i * 16 + 8);
                        values[2 * i + 1] = buf.getLong(offset + i * 16);
                    }
                    yield new Int128ArrayBlock(rows, nulls, values);
                }
                case "uuid" -> {
                    // fixed_size_binary[16] holds the uuid's bytes in text order; Trino's UUID block holds the same
                    // bytes read as two little-endian longs (UuidType's own reading of its 16-byte slice).
                    long[] values = new long[rows * 2];
                    buf.slice(offset, rows * 16).order(ByteOrder.LITTLE_ENDIAN).asLongBuffer().get(values);
                    yield new Int128ArrayBlock(rows, nulls, values);
                }
                default -> {
                    // utf8 and binary (bytes): offsets, then the bytes they point into (shared with the block, not copied).
                    int[] offsets = new int[rows + 1];
                    buf.slice(offset, (rows + 1) * 4).order(ByteOrder.LITTLE_ENDIAN).asIntBuffer().get(offsets);
                    batch.buffers(b, bufferIndex++);
                    yield new VariableWidthBlock(rows, Slices.wrappedBuffer(data, Math.toIntExact(b.offset()), Math.toIntExact(b.length())), offsets, nulls);
                }
            };
        }
        return SourcePage.create(new io.trino.spi.Page(rows, blocks));
    }

    /** Arrow's validity bitmap (1: a value) as Trino's null flags (true: null). */
    private static boolean[] nulls(ByteBuffer buf, Buffer validity, int rows) {
        boolean[] nulls = new boolean[rows];
        if (validity.length() == 0) {
            return nulls;
        }
        int offset = Math.toIntExact(validity.offset());
        for (int i = 0; i < rows; i++) {
            nulls[i] = ((buf.get(offset + (i >> 3)) >> (i & 7)) & 1) == 0;
        }
        return nulls;
    }

    @Override
    public long getCompletedBytes() {
        return bytes;
    }

    @Override
    public java.util.OptionalLong getCompletedPositions() {
        return java.util.OptionalLong.of(positions);
    }

    @Override
    public long getReadTimeNanos() {
        return readNanos;
    }

    @Override
    public boolean isFinished() {
        return finished;
    }

    @Override
    public long getMemoryUsage() {
        return 0;
    }

    @Override
    public void close() throws IOException {
        if (closed) {
            return;
        }
        closed = true;
        onClose.run();
        body.close();
    }
}
