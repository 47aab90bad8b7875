// Package coldread is the cold tier's read side: Query plans a scan of an
// Iceberg table with iceberg-go (partition and file-statistics pruning) and
// reads its Parquet data files with parquet-go into typed columns, row
// groups in parallel, matching each row with table.Condition, the where
// clause's one evaluator, so that the store and the Iceberg table answer a
// query alike (TestPredicatesAgreeHotAndCold).
package coldread
