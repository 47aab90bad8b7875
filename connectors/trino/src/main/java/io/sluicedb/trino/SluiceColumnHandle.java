package io.sluicedb.trino;

import com.fasterxml.jackson.annotation.JsonCreator;
import com.fasterxml.jackson.annotation.JsonProperty;
import io.trino.spi.connector.ColumnHandle;
import io.trino.spi.connector.ColumnMetadata;
import io.trino.spi.type.Type;

import io.trino.spi.TrinoException;
import io.trino.spi.type.DecimalType;
import io.trino.spi.type.Decimals;

import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static io.sluicedb.trino.SluiceErrorCode.SLUICE_BAD_ANSWER;
import static io.trino.spi.type.BigintType.BIGINT;
import static io.trino.spi.type.BooleanType.BOOLEAN;
import static io.trino.spi.type.DateType.DATE;
import static io.trino.spi.type.DoubleType.DOUBLE;
import static io.trino.spi.type.TimeType.TIME_MICROS;
import static io.trino.spi.type.TimestampWithTimeZoneType.TIMESTAMP_TZ_MICROS;
import static io.trino.spi.type.UuidType.UUID;
import static io.trino.spi.type.VarbinaryType.VARBINARY;
import static io.trino.spi.type.VarcharType.VARCHAR;

/**
 * A column: its name and sluice type (int64, float64, string, bool, timestamp, json, date, time_of_day, uuid, bytes,
 * decimal(p,s)).
 */
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
            case "date" -> DATE;
            case "time_of_day" -> TIME_MICROS;
            case "uuid" -> UUID;
            case "bytes" -> VARBINARY;
            default -> {
                Optional<DecimalType> d = decimal();
                yield d.isPresent() ? d.get() : VARCHAR; // string, json
            }
        };
    }

    // sluice names a decimal column decimal(p,s) (coltype's String), p at most 38.
    private static final Pattern DECIMAL = Pattern.compile("decimal\\((\\d+),(\\d+)\\)");

    /**
     * The column's decimal type when it is one: Trino's short decimal (a long per value) up to 18 digits, its long
     * decimal (an Int128) up to 38, as sluice holds them (64 and 128 bits); a wider one is refused rather than read
     * into the wrong block.
     */
    public Optional<DecimalType> decimal() {
        Matcher m = DECIMAL.matcher(sluiceType);
        if (!m.matches()) {
            return Optional.empty();
        }
        int precision = Integer.parseInt(m.group(1));
        int scale = Integer.parseInt(m.group(2));
        if (precision < 1 || precision > Decimals.MAX_PRECISION || scale > precision) {
            throw new TrinoException(SLUICE_BAD_ANSWER, "sluice column " + name + ": type " + sluiceType + " (the connector reads decimals of 1 to " + Decimals.MAX_PRECISION + " digits)");
        }
        return Optional.of(DecimalType.createDecimalType(precision, scale));
    }

    public ColumnMetadata metadata() {
        return new ColumnMetadata(name, trinoType());
    }
}
