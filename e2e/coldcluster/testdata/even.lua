-- The filter of events_even (TestClusterTwoTablesOneTopic): even ids only.
function main(row)
  return row.id % 2 == 0
end
