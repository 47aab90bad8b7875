-- A computed column in a Lua file: days since the account was created.
-- row.created and row.time are unix seconds; a missing field is an error,
-- which the column's on_error policy handles.
function main(row)
  if row.created == nil or row.time == nil then
    error("created and time are required")
  end
  return math.floor((row.time - row.created) / 86400)
end
