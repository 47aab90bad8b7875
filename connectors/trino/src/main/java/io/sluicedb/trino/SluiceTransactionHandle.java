package io.sluicedb.trino;

import com.fasterxml.jackson.annotation.JsonCreator;
import com.fasterxml.jackson.annotation.JsonProperty;
import io.trino.spi.connector.ConnectorTransactionHandle;

import java.util.UUID;

import static java.util.Objects.requireNonNull;

/** One transaction, that is one statement (the catalog is read-only): the key of the metadata it has looked up. */
public record SluiceTransactionHandle(UUID id) implements ConnectorTransactionHandle {
    @JsonCreator
    public SluiceTransactionHandle(@JsonProperty("id") UUID id) {
        this.id = requireNonNull(id, "id is null");
    }

    @JsonProperty
    @Override
    public UUID id() {
        return id;
    }
}
