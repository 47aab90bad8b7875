package io.sluicedb.trino;

import com.fasterxml.jackson.annotation.JsonCreator;
import com.fasterxml.jackson.annotation.JsonProperty;
import io.trino.spi.connector.ConnectorSplit;

import java.util.Map;

/**
 * One node's part of a table, read under a read lease: its store's rows that the Iceberg table lacks (tier "hot"),
 * or also the Iceberg table's (tier "all", the lease's coordinator), so that every row is read once while nodes
 * commit (docs/cluster.md). A keyed table's lease has one split instead, tier "cluster" on the lease's coordinator:
 * every node's part read there under the same holds and merged by key, so that a key whose changes reached two
 * nodes' stores is read once, its latest change (docs/upserts.md, "Which engine reads what").
 */
public record SluiceSplit(String node, String tier, String lease) implements ConnectorSplit {
    /** The tier of a keyed table's one split (server: leases.TierCluster). */
    public static final String TIER_CLUSTER = "cluster";

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

    /** Whether this split is a keyed table's one split: every node's part merged by key on the lease's coordinator. */
    public boolean merged() {
        return TIER_CLUSTER.equals(tier);
    }

    @Override
    public Map<String, String> getSplitInfo() {
        return Map.of("node", node, "tier", tier, "lease", lease);
    }
}
