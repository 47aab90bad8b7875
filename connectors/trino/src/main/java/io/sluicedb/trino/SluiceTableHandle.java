package io.sluicedb.trino;

import com.fasterxml.jackson.annotation.JsonCreator;
import com.fasterxml.jackson.annotation.JsonProperty;
import io.trino.spi.connector.ConnectorTableHandle;

import java.util.List;

/**
 * A table and what is pushed down to the nodes: the sortBy range [from, to) as RFC 3339 text (null: open) and the
 * hashBy values (empty: all). Trino still applies the whole predicate to what comes back; the pushdown only keeps
 * the nodes from sending rows it would drop.
 */
public record SluiceTableHandle(String table, String hashBy, String sortBy, String from, String to, List<String> hashes)
        implements ConnectorTableHandle {
    @JsonCreator
    public SluiceTableHandle(
            @JsonProperty("table") String table,
            @JsonProperty("hashBy") String hashBy,
            @JsonProperty("sortBy") String sortBy,
            @JsonProperty("from") String from,
            @JsonProperty("to") String to,
            @JsonProperty("hashes") List<String> hashes) {
        this.table = table;
        this.hashBy = hashBy;
        this.sortBy = sortBy;
        this.from = from;
        this.to = to;
        this.hashes = List.copyOf(hashes);
    }

    @JsonProperty
    @Override
    public String table() {
        return table;
    }

    @JsonProperty
    @Override
    public String hashBy() {
        return hashBy;
    }

    @JsonProperty
    @Override
    public String sortBy() {
        return sortBy;
    }

    @JsonProperty
    @Override
    public String from() {
        return from;
    }

    @JsonProperty
    @Override
    public String to() {
        return to;
    }

    @JsonProperty
    @Override
    public List<String> hashes() {
        return hashes;
    }
}
