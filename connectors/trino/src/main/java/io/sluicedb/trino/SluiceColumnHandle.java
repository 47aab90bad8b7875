package io.sluicedb.trino;

import com.fasterxml.jackson.annotation.JsonCreator;
import com.fasterxml.jackson.annotation.JsonProperty;
import io.trino.spi.connector.ColumnHandle;
import io.trino.spi.connector.ColumnMetadata;
import io.trino.spi.type.Type;

import static io.trino.spi.type.BigintType.BIGINT;
import static io.trino.spi.type.BooleanType.BOOLEAN;
import static io.trino.spi.type.DoubleType.DOUBLE;
import static io.trino.spi.type.TimestampWithTimeZoneType.TIMESTAMP_TZ_MICROS;
import static io.trino.spi.type.VarcharType.VARCHAR;

/** A column: its name and sluice type (int64, float64, string, bool, timestamp, json). */
public record SluiceColumnHandle(String name, String sluiceType) implements ColumnHandle {
    @JsonCreator
    public SluiceColumnHandle(@JsonProperty("name") String name, @JsonProperty("sluiceType") String sluiceType) {
        this.name = name;
        this.sluiceType = sluiceType;
    }

    @JsonProperty
    @Override
    public String name() {
        return name;
    }

    @JsonProperty
    @Override
    public String sluiceType() {
        return sluiceType;
    }

    /**
     * The Trino type: the same as Trino's Iceberg connector gives the columns sluice commits, so that a join or a
     * UNION with the Iceberg table needs no cast (timestamps are microseconds with time zone, as Iceberg's).
     */
    public Type trinoType() {
        return switch (sluiceType) {
            case "int64", "int32" -> BIGINT;
            case "float64" -> DOUBLE;
            case "bool" -> BOOLEAN;
            case "timestamp" -> TIMESTAMP_TZ_MICROS;
            default -> VARCHAR; // string, json
        };
    }

    public ColumnMetadata metadata() {
        return new ColumnMetadata(name, trinoType());
    }
}
