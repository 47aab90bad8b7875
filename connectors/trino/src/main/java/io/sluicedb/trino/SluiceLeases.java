package io.sluicedb.trino;

import com.google.inject.Inject;

import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The read leases of the queries running on this Trino coordinator, one per query and table: a second scan of the
 * same table in one query (a self-join) reads under the same lease, since a second lease on a node could wait behind
 * a commit that waits behind the first. Every lease of a query is ended when the query ends, whatever became of its
 * splits.
 */
public final class SluiceLeases {
    private final SluiceClient client;
    private final Duration ttl;
    private final Map<String, Map<String, String>> byQuery = new ConcurrentHashMap<>();

    @Inject
    public SluiceLeases(SluiceClient client, SluiceConfig config) {
        this.client = client;
        this.ttl = config.getLeaseTtl().toJavaTime();
    }

    /** The lease of query on table: opened now, or the query's earlier one with its splits counted again. */
    SluiceClient.Lease lease(String queryId, String table) {
        Map<String, String> leases = byQuery.computeIfAbsent(queryId, q -> new ConcurrentHashMap<>());
        synchronized (leases) {
            String id = leases.get(table);
            if (id != null) {
                return client.reuseLease(table, id);
            }
            SluiceClient.Lease l = client.openLease(table, ttl);
            leases.put(table, l.id());
            return l;
        }
    }

    /** Ends every lease of the query. */
    void end(String queryId) {
        Map<String, String> leases = byQuery.remove(queryId);
        if (leases != null) {
            leases.forEach(client::endLease);
        }
    }
}
