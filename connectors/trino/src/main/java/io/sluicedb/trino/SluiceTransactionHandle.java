package io.sluicedb.trino;

import io.trino.spi.connector.ConnectorTransactionHandle;

/** Reads only: one transaction handle serves all. */
public enum SluiceTransactionHandle implements ConnectorTransactionHandle {
    INSTANCE
}
