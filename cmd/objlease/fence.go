package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	neturl "net/url"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/objlease/objlease/objlease"
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
identical bytes; otherwise use "objlease batch". See docs/fencing.md.

An empty standard input is refused (exit 64), the object left as it was:
it is most often a pipeline whose producer failed. --allow-empty writes an
empty object.`

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
(it finds the prefix in $OBJLEASE_COMMIT_URL). See docs/fencing.md.

commit without --merge refuses (exit 64) if nothing was written under token
N, rather than replace the committed set with an empty one; put refuses an
empty standard input. --allow-empty allows both.`

// addToken registers --token, required by every fenced write.
func addToken(fs *flagSet) *uint64 {
	token := tokenVar(fs, "fencing `token` of the writer (e.g. $OBJLEASE_TOKEN)")
	fs.require("token")
	fs.checks = append(fs.checks, func() error {
		if !fs.isSet("token") {
			return errors.New("needs --token N (the fencing token, e.g. $OBJLEASE_TOKEN)")
		}
		return nil
	})
	return token
}

// tokenVar registers --token, a writer's fencing token, whose every bad
// value is refused with the rule: a whole number from 1.
func tokenVar(fs *flagSet, usage string) *uint64 {
	token := new(uint64)
	fs.Func("token", usage, func(s string) error {
		const rule = "want the fencing token the lease gave, a whole number from 1 (e.g. $OBJLEASE_TOKEN)"
		n, err := strconv.ParseUint(s, 10, 64)
		switch {
		case s == "":
			return errors.New("is empty (an unset variable?): " + rule)
		case err != nil:
			return fmt.Errorf("%q is not a token: %s", s, rule)
		case n == 0:
			return errors.New("0 is no token (tokens start at 1): " + rule)
		}
		*token = n
		return nil
	})
	return token
}

// addAllowEmpty registers --allow-empty, without which an empty body or
// an empty batch is refused.
func addAllowEmpty(fs *flagSet, usage string) *bool {
	return fs.Bool("allow-empty", false, usage)
}

// input is standard input as a body to write, read as it is sent so that
// it is never all in memory: a regular file as it is, from where it
// stands; anything else (a pipe, a terminal) copied first into a file in
// the temporary directory ($TMPDIR), removed from the directory at once
// (where the system allows: nothing is left behind even if the process is
// killed) and closed by done. A file that tells no size (those of /proc
// and /sys say 0, or a page) is copied as a pipe is.
//
// What goes wrong here is this machine's, not the store's: a directory
// on standard input is a usage error, a $TMPDIR that cannot take the copy
// errLocalInput (74), each with the way round.
func (c *cli) input(ctx context.Context) (body *io.SectionReader, done func(), err error) {
	if f, ok := c.stdin.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.IsDir() {
			return nil, nil, usagef("standard input is a directory, not data: give a file (< FILE) or a pipe")
		} else if err == nil && fi.Mode().IsRegular() && fi.Size() > 0 && !pseudoFile(f) {
			if at, err := f.Seek(0, io.SeekCurrent); err == nil {
				if at > fi.Size() {
					return nil, nil, &tagged{fmt.Sprintf("standard input is positioned past its end (at byte %d of a file of %d bytes): nothing left to write; give the file from its start (< FILE)", at, fi.Size()), errEmpty}
				}
				return io.NewSectionReader(f, at, fi.Size()-at), func() {}, nil
			}
		}
	}
	tmp, err := os.CreateTemp("", "objlease-stdin-")
	if err != nil {
		return nil, nil, tmpdirErr(err)
	}
	removed := os.Remove(tmp.Name()) == nil
	done = func() {
		tmp.Close()
		if !removed {
			os.Remove(tmp.Name())
		}
	}
	n, err := copyUntil(ctx, tmp, c.stdin)
	if err == nil {
		err = context.Cause(ctx) // a signal as the input ended: write nothing
	}
	if err != nil {
		done()
		var pe *fs.PathError
		switch {
		case context.Cause(ctx) != nil && errors.Is(err, context.Cause(ctx)):
			return nil, nil, err
		case errors.Is(err, syscall.EISDIR):
			return nil, nil, usagef("standard input is a directory, not data: give a file (< FILE) or a pipe")
		case errors.As(err, &pe) && pe.Path == tmp.Name(), errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
			return nil, nil, tmpdirErr(err)
		}
		return nil, nil, &tagged{fmt.Sprintf("reading standard input: %v; nothing was written", err), errLocalInput}
	}
	return io.NewSectionReader(tmp, 0, n), done, nil
}

// tmpdirErr is the failure to copy standard input into $TMPDIR, with the
// way round: another $TMPDIR, or a file on standard input, which is read
// where it is.
func tmpdirErr(err error) error {
	why := err.Error()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		why = pe.Err.Error()
	}
	dir := os.TempDir()
	where := "the temporary directory " + dir
	if os.Getenv("TMPDIR") != "" {
		where = "TMPDIR=" + dir
	}
	return &tagged{fmt.Sprintf("standard input, not a file, is copied into %s before it is sent, and that failed: %s; set TMPDIR to a writable directory with room for it, or give a file (< FILE), which is sent from where it is; nothing was written", where, why), errLocalInput}
}

// copyUntil copies src to dst until src ends or ctx does, whichever is
// first; ended by ctx, it returns ctx's cause. A read of a pipe or a
// terminal blocks in the kernel, out of reach of any context: a signal
// would wait for the producer's next bytes, or for ever. The copy goes
// on in a goroutine, left behind when ctx ends: its next read or its
// write into dst, which the caller closes, ends it, and the process is
// about to exit anyway.
func copyUntil(ctx context.Context, dst io.Writer, src io.Reader) (int64, error) {
	type result struct {
		n   int64
		err error
	}
	copied := make(chan result, 1)
	go func() {
		n, err := io.Copy(dst, src)
		copied <- result{n, err}
	}()
	select {
	case r := <-copied:
		return r.n, r.err
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	}
}

// emptyInput is the refusal of an empty standard input.
func emptyInput(what string) error {
	return &tagged{"standard input is empty: refusing to " + what + " (--allow-empty writes an empty object)", errEmpty}
}

// checkWritten refuses a commit of token's batch under prefix that would
// replace the committed set with an empty one: nothing was written under
// the token (the job failed to write, or wrote elsewhere).
func checkWritten(ctx context.Context, store providers.Store, prefix string, token uint64) error {
	page, err := store.List(ctx, fence.TokenDir(prefix, token), "", 1)
	if err != nil {
		return err
	}
	if len(page.Objects) == 0 {
		return &tagged{fmt.Sprintf("token %d wrote nothing under the prefix: refusing to replace the committed set with an empty one (--allow-empty commits an empty set)", token), errEmpty}
	}
	return nil
}

func addUniquePayloads(fs *flagSet) *bool {
	return fs.Bool("unique-payloads", false, "promise that no two writes to the object carry identical bytes (needed on S3)")
}

// fencedErr adds what to do about a refusal to err.
func fencedErr(op, url string, err error) error {
	if errors.Is(err, fence.ErrVersionsRepeat) {
		err = fmt.Errorf("%w; pass --unique-payloads if no two writes carry identical bytes, or use objlease batch", err)
	}
	return opErr(op, url, err)
}

// putCmd is a fenced write of stdin.
func (c *cli) putCmd(fs *flagSet) action {
	token := addToken(fs)
	unique := addUniquePayloads(fs)
	allowEmpty := addAllowEmpty(fs, "write an empty object when standard input is empty (refused otherwise: an empty stdin is most often a failed pipeline)")
	return c.onStore(fs, "put", true, func(ctx context.Context, url string, store providers.Store, key string) error {
		body, done, err := c.input(ctx)
		if err != nil {
			return opErr("put", url, err)
		}
		defer done()
		if body.Size() == 0 && !*allowEmpty {
			return opErr("put", url, emptyInput("replace the object with zero bytes"))
		}
		res, err := fence.PutFrom(ctx, store, key, *token, body, fence.Options{UniquePayloads: *unique})
		if err != nil {
			return fencedErr("put", url, err)
		}
		c.log.Debug("written", slog.String("key", key), slog.String("version", res.Version))
		return nil
	})
}

// reservedName refuses a URL that points into a batch's own directory,
// whether the "_objlease/" segment falls in the key or, for a plain path,
// in the directory taken as the store (fence.Put checks only the key).
func reservedName(rawURL string) error {
	p := rawURL
	if u, err := neturl.Parse(rawURL); err == nil && u.Scheme != "" {
		p = u.Host + u.Path
	}
	if strings.Contains(p, "_objlease/") {
		return fmt.Errorf("%w: only a batch writes under _objlease/, and a write there would break the prefix's commits", fence.ErrReservedKey)
	}
	return nil
}

// rmCmd is a fenced delete.
func (c *cli) rmCmd(fs *flagSet) action {
	token := addToken(fs)
	unique := addUniquePayloads(fs)
	return c.onStore(fs, "rm", true, func(ctx context.Context, url string, store providers.Store, key string) error {
		return fencedErr("rm", url, fence.Delete(ctx, store, key, *token, fence.Options{UniquePayloads: *unique}))
	})
}

// commitResult is what batch commit prints with -o json.
type commitResult struct {
	Prefix  string   `json:"prefix"`
	Token   uint64   `json:"token"`
	Objects int      `json:"objects"`
	Names   []string `json:"names"`
}

// batchCmd runs the batch subcommands. Its flags are the union of theirs;
// each subcommand checks the ones it needs.
func (c *cli) batchCmd(fs *flagSet) action {
	tokenp := tokenVar(fs, "put, commit: fencing `token` of the writer (e.g. $OBJLEASE_TOKEN)")
	merge := fs.Bool("merge", false, "commit: keep earlier committed objects this batch did not rewrite")
	allowEmpty := addAllowEmpty(fs, "put: write an empty object when standard input is empty; commit: commit even if nothing was written under the token, replacing the committed set with an empty one (both refused otherwise)")
	asJSON := addOutput(fs)
	return func(ctx context.Context, pos []string) error {
		want := map[string]int{"put": 3, "commit": 2, "show": 2}
		if len(pos) == 0 || want[pos[0]] != len(pos) {
			return usagef("usage: objlease batch put --token N PREFIX-URL NAME | commit --token N PREFIX-URL | show PREFIX-URL (got %q)", pos)
		}
		sub, url, token := pos[0], pos[1], *tokenp
		op := "batch " + sub
		if sub != "show" && token == 0 {
			return usagef("%s needs --token N (the fencing token, e.g. $OBJLEASE_TOKEN)", op)
		}
		store, prefix, err := c.open(ctx, url, false)
		if err != nil {
			return opErr(op, url, err)
		}
		defer store.Close()
		switch sub {
		case "put":
			body, done, err := c.input(ctx)
			if err != nil {
				return opErr(op, url, err)
			}
			defer done()
			if body.Size() == 0 && !*allowEmpty {
				return opErr(op, url, emptyInput(fmt.Sprintf("write %q with zero bytes", pos[2])))
			}
			err = fence.NewBatch(store, prefix, token).PutFrom(ctx, pos[2], body)
			if errors.Is(err, providers.ErrPrecondition) {
				// Batch objects are write-once: a refusal is a fenced one.
				err = fmt.Errorf("%w: %q was already written under token %d (batch objects are write-once): %w", fence.ErrStale, pos[2], token, err)
			}
			return opErr(op, url, err)
		case "commit":
			if !*merge && !*allowEmpty {
				if err := checkWritten(ctx, store, prefix, token); err != nil {
					return opErr(op, url, err)
				}
			}
			m, err := fence.CommitWritten(ctx, store, prefix, token, *merge)
			if err != nil {
				return fencedErr(op, url, err)
			}
			if *asJSON {
				return c.printJSON(commitResult{Prefix: url, Token: m.Token, Objects: len(m.Objects), Names: m.Names()})
			}
			_, err = fmt.Fprintf(c.stdout, "committed %d objects with token %d\n", len(m.Objects), m.Token)
			return err
		}
		m, err := fence.ReadCommitted(ctx, store, prefix)
		if errors.Is(err, providers.ErrNotFound) {
			return opErr(op, url, noCommittedSet(ctx, store, prefix, url, err))
		}
		if err != nil {
			return opErr(op, url, err)
		}
		if *asJSON {
			return c.printJSON(m)
		}
		fmt.Fprintf(c.stdout, "token %d committed %s\n", m.Token, stamp(m.CommittedAt))
		for _, n := range m.Names() {
			fmt.Fprintf(c.stdout, "%s\t%d\t%s\n", n, m.Objects[n].Size, m.Objects[n].Key)
		}
		return nil
	}
}

// noCommittedSet says that nothing has been committed under prefix, and,
// where the prefix does not end in "/" (so that the batch's directory is
// glued to its last name: "lease_objlease/"), what the URL names instead:
// a lease record or another object, or a directory with a committed set.
func noCommittedSet(ctx context.Context, store providers.Store, prefix, url string, err error) error {
	if prefix == "" || strings.HasSuffix(prefix, "/") {
		return fmt.Errorf("no committed set: %w", err)
	}
	dir := url + "/"
	if obj, gerr := store.Get(ctx, prefix, objlease.MaxRecordSize); gerr == nil {
		if _, derr := objlease.DecodeRecord(prefix, obj.Data); derr == nil {
			return &tagged{fmt.Sprintf("no committed set: %q is a lease record, not a batch's prefix (give the PREFIX-URL that batch commit or run --commit wrote under, such as s3://b/out/)", prefix), providers.ErrNotFound}
		}
	}
	if _, serr := fence.ReadCommitted(ctx, store, prefix+"/"); serr == nil {
		return &tagged{fmt.Sprintf("no committed set under the prefix %q (the URL ends without /, so the names start %q); there is one under the directory: give %s", prefix, prefix+"_objlease/", dir), providers.ErrNotFound}
	}
	return &tagged{fmt.Sprintf("no committed set under the prefix %q (the URL ends without /, so the names start %q; for the directory give %s)", prefix, prefix+"_objlease/", dir), providers.ErrNotFound}
}

// commitAfterRun commits the guarded prefix at rawURL for token, after the
// command run by "run --commit" succeeded. Unless allowEmpty, it refuses
// to commit if the command wrote nothing.
func (c *cli) commitAfterRun(rawURL string, token uint64, allowEmpty bool) error {
	ctx := context.Background()
	store, prefix, err := c.open(ctx, rawURL, false)
	if err != nil {
		return opErr("commit", rawURL, err)
	}
	defer store.Close()
	if !allowEmpty {
		if err := checkWritten(ctx, store, prefix, token); err != nil {
			return opErr("commit", rawURL, err)
		}
	}
	m, err := fence.CommitWritten(ctx, store, prefix, token, false)
	if err != nil {
		return fencedErr("commit", rawURL, err)
	}
	c.log.Info("committed", slog.Int("objects", len(m.Objects)), slog.Uint64("token", token))
	return nil
}
