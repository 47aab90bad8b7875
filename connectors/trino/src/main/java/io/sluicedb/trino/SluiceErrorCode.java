package io.sluicedb.trino;

import io.trino.spi.ErrorCode;
import io.trino.spi.ErrorCodeSupplier;
import io.trino.spi.ErrorType;

import static io.trino.spi.ErrorType.EXTERNAL;

/**
 * What went wrong, as Trino reports it to the user. Each is EXTERNAL: the fault is in a sluice node or in what the
 * catalog says about it, not in Trino or in the statement, so a client or an operator knows where to look.
 */
public enum SluiceErrorCode implements ErrorCodeSupplier {
    /** A node could not be reached, timed out, failed the request or broke off its answer. */
    SLUICE_NODE_ERROR(0, EXTERNAL),
    /** The statement's read lease ended before its splits were read (its TTL fired): sluice.lease-ttl is too short. */
    SLUICE_LEASE_EXPIRED(1, EXTERNAL),
    /** A node answered with something the connector cannot read (another version, or not a sluice node). */
    SLUICE_BAD_ANSWER(2, EXTERNAL),
    /** A node refused the catalog's credentials (401) or they lack the query permission on the table (403). */
    SLUICE_ACCESS_DENIED(3, EXTERNAL),
    /** The catalog's token file could not be read. */
    SLUICE_TOKEN_UNREADABLE(4, EXTERNAL);

    // A range apart from those of Trino's own connectors, so a client can tell the connector's codes from theirs.
    private static final int BASE = 0x0532_0000;

    private final ErrorCode errorCode;

    SluiceErrorCode(int offset, ErrorType type) {
        errorCode = new ErrorCode(BASE + offset, name(), type);
    }

    @Override
    public ErrorCode toErrorCode() {
        return errorCode;
    }
}
