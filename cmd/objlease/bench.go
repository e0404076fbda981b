package main

import (
	"context"
	"os"

	"github.com/objlease/objlease/cmd/objlease/internal/bench"
	"github.com/objlease/objlease/providers"
)

const benchDetail = bench.Detail

// benchHolderCmd is the hidden command bench's failover section starts and
// kills.
const benchHolderCmd = "_bench-holder"

func (c *cli) benchCmd(fs *flagSet) action {
	run := bench.Flags(fs.FlagSet)
	return fs.withURL(func(ctx context.Context, url string) error {
		return opErr("bench", url, run(ctx, c.benchEnv(), url))
	})
}

func (c *cli) benchHolderCmd(fs *flagSet) action {
	run := bench.HolderFlags(fs.FlagSet)
	return func(ctx context.Context, pos []string) error {
		return run(ctx, c.benchEnv(), pos)
	}
}

func (c *cli) benchEnv() bench.Env {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	return bench.Env{Stdout: c.stdout, Stderr: c.stderr, Log: c.log, Holder: []string{exe, benchHolderCmd},
		Open: func(ctx context.Context, rawURL string, opts providers.OpenOptions) (providers.Store, string, error) {
			return c.openAny(ctx, rawURL, false, opts)
		}}
}
