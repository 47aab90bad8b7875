package server

// The server's tests serve compact.iceberg: link the cold tier, as
// cmd/sluice-full does.
import _ "github.com/sluicedb/sluice/coldtier"
