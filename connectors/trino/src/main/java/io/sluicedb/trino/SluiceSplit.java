package io.sluicedb.trino;

import com.fasterxml.jackson.annotation.JsonCreator;
import com.fasterxml.jackson.annotation.JsonProperty;
import io.trino.spi.connector.ConnectorSplit;

import java.util.Map;

/**
 * One node's part of a table: its store's rows (tier "hot"), or also the Iceberg table's (tier "all", one split per
 * query), so that every row is read once (docs/cluster.md).
 */
public record SluiceSplit(String node, String tier) implements ConnectorSplit {
    @JsonCreator
    public SluiceSplit(@JsonProperty("node") String node, @JsonProperty("tier") String tier) {
        this.node = node;
        this.tier = tier;
    }

    @JsonProperty
    @Override
    public String node() {
        return node;
    }

    @JsonProperty
    @Override
    public String tier() {
        return tier;
    }

    @Override
    public Map<String, String> getSplitInfo() {
        return Map.of("node", node, "tier", tier);
    }
}
