package coldtier

import (
	"context"
	"time"

	"github.com/sluicedb/sluice/internal/coldapi"
	"github.com/sluicedb/sluice/table"
)

// Importing coldtier registers it as the cold tier of the process: the
// server reaches it through coldapi only, so that a binary links iceberg-go
// only when its main imports this package (docs/architecture.md).
func init() {
	coldapi.Register(func(ctx context.Context, cfg coldapi.Config, t *table.Table) (coldapi.Tier, error) {
		c, err := Open(ctx, Config{
			Warehouse: cfg.Warehouse,
			S3:        S3{Endpoint: cfg.S3.Endpoint, Region: cfg.S3.Region, PathStyle: cfg.S3.PathStyle},
			Catalog: Catalog{Type: cfg.Catalog.Type, URI: cfg.Catalog.URI, Name: cfg.Catalog.Name,
				Namespace: cfg.Catalog.Namespace, Properties: cfg.Catalog.Properties,
				Token: cfg.Catalog.Token, Credential: cfg.Catalog.Credential, Password: cfg.Catalog.Password},
			Node: cfg.Node, StateDir: cfg.StateDir, RowGroupRows: cfg.RowGroupRows, Unsorted: cfg.Unsorted,
			Logger: cfg.Logger,
		}, t)
		if err != nil {
			return nil, err
		}
		return tier{c, cfg.Continuous}, nil
	})
}

// tier is a Compactor as a coldapi.Tier.
type tier struct {
	*Compactor
	continuous bool
}

// The entry points that may reach S3 hand the Compactor's AWS config down
// in their context (withAWS, awslog.go).

func (t tier) Compact(ctx context.Context, watermark time.Time, remove bool) (coldapi.Stats, error) {
	st, err := t.Compactor.Compact(t.withAWS(ctx), watermark, Options{Remove: remove, Continuous: t.continuous})
	return coldapi.Stats{Rows: st.Rows, Bytes: st.Bytes, Files: st.Files, Watermark: st.Watermark,
		SnapshotID: st.SnapshotID, Recovered: st.Recovered, DeleteFiles: st.DeleteFiles}, err
}

func (t tier) Counters() coldapi.Counters {
	c, m := t.Compactor.Counters(), t.Compactor.MaintainCounters()
	return coldapi.Counters{BytesUploaded: c.BytesUploaded.Load(), Files: c.Files.Load(), Rows: c.Rows.Load(),
		CommitRetries: c.CommitRetries.Load(), OrphanFiles: c.OrphanFiles.Load(), Recoveries: c.Recoveries.Load(),
		RowsSkipped:  c.Skipped.Load(),
		MaintainRuns: m.Runs, FilesRewritten: m.FilesRewritten, SnapshotsExpired: m.SnapshotsExpired,
		ExpiredFilesDeleted: m.FilesDeleted}
}

func (t tier) Maintain(ctx context.Context, o coldapi.MaintainOptions) (coldapi.MaintainStats, error) {
	st, err := t.Compactor.Maintain(t.withAWS(ctx), MaintainOptions(o))
	return coldapi.MaintainStats(st), err
}

func (t tier) DeleteOrphanFiles(ctx context.Context, olderThan time.Duration) ([]string, error) {
	return t.Compactor.DeleteOrphanFiles(t.withAWS(ctx), olderThan)
}

func (t tier) QueryValues(ctx context.Context, q table.Query, cold bool, emit func([]table.Column, []any) error) error {
	return t.Compactor.QueryValues(t.withAWS(ctx), q, cold, emit)
}

func (t tier) QueryValuesHeld(ctx context.Context, q table.Query, cold, hotOnly bool, emit func([]table.Column, []any) error) error {
	return t.Compactor.QueryValuesHeld(t.withAWS(ctx), q, cold, hotOnly, emit)
}
