-- A filter: keep every event except the test ones.
function main(row)
  return row.event ~= "test"
end
