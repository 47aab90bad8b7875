package io.sluicedb.trino;

import com.fasterxml.jackson.annotation.JsonCreator;
import com.fasterxml.jackson.annotation.JsonProperty;
import io.trino.spi.connector.ConnectorSplit;

import java.util.Map;

/**
 * One node's part of a table, read under a read lease: its store's rows that the Iceberg table lacks (tier "hot"),
 * or also the Iceberg table's (tier "all", the lease's coordinator), so that every row is read once while nodes
 * commit (docs/cluster.md).
 */
public record SluiceSplit(String node, String tier, String lease) implements ConnectorSplit {
    @JsonCreator
    public SluiceSplit(@JsonProperty("node") String node, @JsonProperty("tier") String tier, @JsonProperty("lease") String lease) {
        this.node = node;
        this.tier = tier;
        this.lease = lease;
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

    @JsonProperty
    @Override
    public String lease() {
        return lease;
    }

    @Override
    public Map<String, String> getSplitInfo() {
        return Map.of("node", node, "tier", tier, "lease", lease);
    }
}
