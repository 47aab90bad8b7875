package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicedb/sluice/bench/rdbbench"
	"github.com/sluicedb/sluice/internal/rdbcorpus"
)

func init() {
	var (
		corpus     rdbcorpus.Options
		cases      []string
		runs       int
		profileDir string
		child      string
		childFile  string
		childProf  string
	)
	cmd := &cobra.Command{
		Use:   "rdb",
		Short: "Benchmark the RDB parser and tools on a large generated snapshot (each case in its own process)",
		Long: `Generate (or reuse, from the cache directory) a realistic mixed RDB with a real
redis-server, then run each case in a child process and print a Markdown table:
MB/s, ns/key, bytes allocated per key and per byte, allocation count, peak RSS.
The fastest of --runs runs is reported; peak RSS is the largest seen.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if child != "" {
				// Child mode: run one case and print its result as JSON.
				res, err := rdbbench.RunBenchCase(cmd.Context(), child, childFile, childProf)
				if err != nil {
					return err
				}
				return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
			}
			self, err := os.Executable()
			if err != nil {
				return err
			}
			corpus.Log = cmd.ErrOrStderr()
			if profileDir != "" {
				if err := os.MkdirAll(profileDir, 0o755); err != nil {
					return err
				}
			}
			rep, err := rdbbench.RunBench(cmd.Context(), rdbbench.BenchOptions{
				Corpus: corpus, Cases: cases, Runs: runs, ProfileDir: profileDir, Log: cmd.ErrOrStderr(),
				Child: func(name, file, prof string) *exec.Cmd {
					return exec.Command(self, "rdb", "--child", name, "--child-file", file, "--child-profile", prof)
				},
			})
			if err != nil {
				return err
			}
			rdbbench.WriteBenchTable(cmd.OutOrStdout(), rep)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&corpus.SizeMB, "size-mb", rdbcorpus.DefaultSizeMB, "approximate size of the generated RDB in MiB")
	f.StringVar(&corpus.Dir, "cache-dir", rdbcorpus.DefaultCacheDir(), "where generated RDBs are kept and reused")
	f.StringVar(&corpus.RedisServer, "redis-server", "redis-server", "redis-server binary used to generate the RDB")
	f.BoolVar(&corpus.Force, "regenerate", false, "generate the RDB even if a cached one exists")
	f.StringSliceVar(&cases, "cases", nil, "cases to run (default all: "+strings.Join(rdbbench.BenchCases, ",")+")")
	f.IntVar(&runs, "runs", 3, "runs per case; the fastest is reported")
	f.StringVar(&profileDir, "profile-dir", "", "write a CPU profile per case (<case>.pprof) into this directory")
	f.StringVar(&child, "child", "", "internal: run one case in this process")
	f.StringVar(&childFile, "child-file", "", "internal: the RDB file for --child")
	f.StringVar(&childProf, "child-profile", "", "internal: CPU profile path for --child")
	for _, name := range []string{"child", "child-file", "child-profile"} {
		_ = f.MarkHidden(name)
	}
	rootCmd.AddCommand(cmd)
}
