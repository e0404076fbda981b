package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/objlease/objlease/objlease/fence"
	"github.com/objlease/objlease/providers"
)

const putDetail = `Writes standard input to the object at URL if --token is at least the highest
token that has written it; the store refuses an older token (exit 77). The
check and the write are one conditional request, so a writer paused past its
lease cannot overwrite a newer holder's data:

  objlease run s3://b/leases/job -- sh -c 'make-report | objlease put --token $OBJLEASE_TOKEN --unique-payloads s3://b/out/report.csv'

On S3 (whose versions repeat when identical bytes are written again) the
write is refused unless --unique-payloads promises that no two writes carry
identical bytes; otherwise use "objlease batch". See docs/fencing.md.`

const rmDetail = `Deletes the object at URL if --token is at least the highest token that has
written it. The object becomes an empty tombstone that keeps the token, so an
older token still cannot write it.`

const batchDetail = `Guarded output prefixes: a job writes objects under its own token's directory
below PREFIX-URL, then commits them; a job with an older token can neither
commit nor overwrite what a newer one committed.

  objlease batch put --token N PREFIX-URL NAME < data   write one object of the batch
  objlease batch commit --token N [--merge] PREFIX-URL   commit every object written with token N
  objlease batch show [-o json] PREFIX-URL               print the committed set

"objlease run --commit PREFIX-URL" commits for you when the command succeeds
(it finds the prefix in $OBJLEASE_COMMIT_URL). See docs/fencing.md.`

// cmdPut is a fenced write of stdin.
func (c *cli) cmdPut(args []string) int {
	f := c.flags("put")
	store, key, code := c.fencedTarget(f, args)
	if code != proceed {
		return code
	}
	defer store.Close()
	data, err := io.ReadAll(os.Stdin)
	if err != nil {
		c.log.Error("reading standard input", slog.Any("err", err))
		return exitUnavailable
	}
	res, err := fence.Put(context.Background(), store, key, f.token, data, fence.Options{UniquePayloads: f.uniquePayloads})
	if err != nil {
		return c.failFenced("fenced put refused", err)
	}
	c.log.Debug("written", slog.String("key", key), slog.String("version", res.Version))
	return exitOK
}

// cmdRm is a fenced delete.
func (c *cli) cmdRm(args []string) int {
	f := c.flags("rm")
	store, key, code := c.fencedTarget(f, args)
	if code != proceed {
		return code
	}
	defer store.Close()
	if err := fence.Delete(context.Background(), store, key, f.token, fence.Options{UniquePayloads: f.uniquePayloads}); err != nil {
		return c.failFenced("fenced delete refused", err)
	}
	return exitOK
}

func (c *cli) fencedTarget(f *flagSet, args []string) (providers.Store, string, int) {
	url, code := f.oneURL(c, args)
	if code != proceed {
		return nil, "", code
	}
	if code := f.needToken(c); code != proceed {
		return nil, "", code
	}
	return c.open(context.Background(), url, true)
}

// needToken insists on --token: a fenced write without one is meaningless.
func (f *flagSet) needToken(c *cli) int {
	if f.token == 0 {
		c.log.Error(f.Name() + " needs --token N (the fencing token, e.g. $OBJLEASE_TOKEN)")
		return exitUsage
	}
	return proceed
}

func (c *cli) failFenced(msg string, err error) int {
	switch {
	case errors.Is(err, fence.ErrStale):
		c.log.Error(msg, slog.Any("err", err))
		return exitStale
	case errors.Is(err, fence.ErrVersionsRepeat):
		c.log.Error(msg+"; pass --unique-payloads if no two writes carry identical bytes, or use objlease batch", slog.Any("err", err))
		return exitUsage
	}
	return c.fail(msg, err)
}

// cmdBatch dispatches the batch subcommands.
func (c *cli) cmdBatch(args []string) int {
	if len(args) == 0 {
		c.log.Error("batch needs a subcommand: put, commit or show; see objlease help batch")
		return exitUsage
	}
	f := c.flags("batch")
	pos, _, code := f.parse(c, args[1:], 0)
	if code != proceed {
		return code
	}
	if code := f.check(c); code != proceed {
		return code
	}
	want := map[string]int{"put": 2, "commit": 1, "show": 1}
	n, ok := want[args[0]]
	if !ok || len(pos) != n {
		c.log.Error(fmt.Sprintf("usage: objlease batch put --token N PREFIX-URL NAME | commit --token N PREFIX-URL | show PREFIX-URL (got %q)", args))
		return exitUsage
	}
	if args[0] != "show" {
		if code := f.needToken(c); code != proceed {
			return code
		}
	}
	ctx := context.Background()
	store, prefix, code := c.open(ctx, pos[0], false)
	if code != proceed {
		return code
	}
	defer store.Close()
	switch args[0] {
	case "put":
		data, err := io.ReadAll(os.Stdin)
		if err != nil {
			c.log.Error("reading standard input", slog.Any("err", err))
			return exitUnavailable
		}
		if err := fence.NewBatch(store, prefix, f.token).Put(ctx, pos[1], data); err != nil {
			if errors.Is(err, providers.ErrPrecondition) {
				c.log.Error("batch put refused", slog.Any("err", err))
				return exitStale
			}
			return c.fail("batch put failed", err)
		}
		return exitOK
	case "commit":
		m, err := fence.CommitWritten(ctx, store, prefix, f.token, f.merge)
		if err != nil {
			return c.failFenced("commit refused", err)
		}
		fmt.Fprintf(c.stdout, "committed %d objects with token %d\n", len(m.Objects), m.Token)
		return exitOK
	}
	m, err := fence.ReadCommitted(ctx, store, prefix)
	if err != nil {
		return c.fail("no committed set", err)
	}
	if f.output == "json" {
		return c.printJSON(m)
	}
	fmt.Fprintf(c.stdout, "token %d committed %s\n", m.Token, m.CommittedAt.Format("2006-01-02T15:04:05Z"))
	for _, n := range m.Names() {
		fmt.Fprintf(c.stdout, "%s\t%d\t%s\n", n, m.Objects[n].Size, m.Objects[n].Key)
	}
	return exitOK
}

// commitAfterRun commits the guarded prefix at rawURL for token, after the
// command run by "run --commit" succeeded.
func (c *cli) commitAfterRun(rawURL string, token uint64) int {
	ctx := context.Background()
	store, prefix, code := c.open(ctx, rawURL, false)
	if code != proceed {
		return code
	}
	defer store.Close()
	m, err := fence.CommitWritten(ctx, store, prefix, token, false)
	if err != nil {
		return c.failFenced("commit refused", err)
	}
	c.log.Info("committed", slog.Int("objects", len(m.Objects)), slog.Uint64("token", token))
	return exitOK
}
