package io.sluicedb.trino;

import io.trino.spi.TrinoException;
import io.trino.spi.connector.RecordCursor;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.ByteArrayInputStream;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.List;

import static io.sluicedb.trino.SluiceErrorCode.SLUICE_BAD_ANSWER;
import static io.sluicedb.trino.SluiceErrorCode.SLUICE_LEASE_EXPIRED;
import static io.sluicedb.trino.SluiceErrorCode.SLUICE_NODE_ERROR;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The error code a split fails with for each kind of broken answer a node (or something posing as one) sends. */
@Timeout(60)
class TestSluiceAnswers {
    private static final List<SluiceColumnHandle> COLUMNS = List.of(new SluiceColumnHandle("n", "int64"));

    private static InputStream body(String text) {
        return new ByteArrayInputStream(text.getBytes(StandardCharsets.UTF_8));
    }

    private static void ndjsonFails(SluiceErrorCode want, String answer) {
        RecordCursor cursor = new SluiceRecordCursor("http://node-a:8080", COLUMNS, body(answer), () -> {});
        TrinoException e = assertThrows(TrinoException.class, () -> {
            while (cursor.advanceNextPosition()) {
                cursor.getLong(0);
            }
        });
        assertEquals(want.toErrorCode(), e.getErrorCode(), e.getMessage());
        cursor.close();
    }

    @Test
    void ndjsonLeaseEndedMidRead() {
        ndjsonFails(SLUICE_LEASE_EXPIRED, "{\"n\":1}\n{\"error\":\"read lease ended: lease L1 expired after its TTL of 5m0s\"}\n");
    }

    @Test
    void ndjsonNodeFailedMidRead() {
        ndjsonFails(SLUICE_NODE_ERROR, "{\"n\":1}\n{\"error\":\"reading segment 7: input/output error\"}\n");
    }

    @Test
    void ndjsonNotObjects() {
        ndjsonFails(SLUICE_BAD_ANSWER, "[1,2,3]\n");
    }

    @Test
    void ndjsonBrokenOff() {
        ndjsonFails(SLUICE_NODE_ERROR, "{\"n\":1}\n{\"n\":");
    }

    private static TrinoException arrowFails(SluiceErrorCode want, byte[] answer) {
        SluiceArrowPageSource pages = new SluiceArrowPageSource("http://node-a:8080", COLUMNS, 1, new ByteArrayInputStream(answer), () -> {});
        TrinoException e = assertThrows(TrinoException.class, () -> {
            while (pages.getNextSourcePage() != null) {
                // read on
            }
        });
        assertEquals(want.toErrorCode(), e.getErrorCode(), e.getMessage());
        return e;
    }

    /** A proxy's page with status 200 is refused at once, not taken for a 1.8 GB Arrow message to allocate. */
    @Test
    void arrowNotArrow() {
        TrinoException e = arrowFails(SLUICE_BAD_ANSWER, "<html><body>Bad gateway</body></html>".getBytes(StandardCharsets.UTF_8));
        assertTrue(e.getMessage().contains("not an Arrow stream"), e.getMessage());
    }

    @Test
    void arrowBrokenOff() {
        // A continuation marker and a length, then the end of the body: a node that failed mid-answer.
        arrowFails(SLUICE_NODE_ERROR, new byte[] {(byte) 0xFF, (byte) 0xFF, (byte) 0xFF, (byte) 0xFF, 64, 0, 0, 0, 1, 2, 3});
    }

    @Test
    void arrowBytesAfterTheEnd() {
        // The end-of-stream marker, then more: the stream did not end as a node ends a whole answer.
        arrowFails(SLUICE_NODE_ERROR, new byte[] {(byte) 0xFF, (byte) 0xFF, (byte) 0xFF, (byte) 0xFF, 0, 0, 0, 0, 42});
    }
}
