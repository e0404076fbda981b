package main

import (
	"context"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/providers"
)

// onStore returns the action of a command on the store its one URL names:
// it opens the store, closes it once run returns, and gives run the key
// (or prefix) the URL names after the store. With object the URL must name
// an object that the command writes fenced, so one under a batch's own
// directory is refused before the store is opened.
func (c *cli) onStore(fs *flagSet, command string, object bool, run func(ctx context.Context, url string, store providers.Store, key string) error) action {
	return fs.withURL(func(ctx context.Context, url string) error {
		if object {
			if err := reservedName(url); err != nil {
				return opErr(command, url, err)
			}
		}
		store, key, err := c.open(ctx, url, object)
		if err != nil {
			return opErr(command, url, err)
		}
		defer store.Close()
		return run(ctx, url, store, key)
	})
}

// open opens the store a URL names. With wantKey it refuses a URL that
// names no object (a bucket or directory). It refuses a mem:// URL: see
// inProcess.
func (c *cli) open(ctx context.Context, rawURL string, wantKey bool) (providers.Store, string, error) {
	if err := inProcess(rawURL); err != nil {
		return nil, "", err
	}
	return c.openAny(ctx, rawURL, wantKey, providers.OpenOptions{})
}

// openAny is open that also takes a mem:// URL and options for the
// store's client, for bench, which keeps every lease of a mem:// run
// inside its own process and counts what goes on the wire.
func (c *cli) openAny(ctx context.Context, rawURL string, wantKey bool, opts providers.OpenOptions) (providers.Store, string, error) {
	if err := climbs(rawURL); err != nil {
		return nil, "", err
	}
	b, key, err := providers.OpenWith(ctx, storeURL(rawURL), opts)
	if err != nil {
		return nil, "", err
	}
	var store providers.Store = b.WithRequestTimeout(c.requestTimeout)
	if wantKey && key == "" {
		store.Close()
		return nil, "", usagef("URL %q names no lease key (it names a bucket or directory)", rawURL)
	}
	if c.probe != nil {
		store = observed{store, c.probe} // --http: /healthz reports its failures
	}
	return store, key, nil
}

// client opens the lease at rawURL with the options the flags give. The
// caller closes cl.Store().
func (c *cli) client(ctx context.Context, lf *leaseFlags, rawURL string) (*objlease.Client, error) {
	return c.clientWith(ctx, lf, rawURL, c.log, nil)
}

// clientWith is client with the options the flags give changed by adjust,
// if not nil, on a session that logs to log (nil: nowhere).
func (c *cli) clientWith(ctx context.Context, lf *leaseFlags, rawURL string, log *slog.Logger, adjust func(*objlease.Options)) (*objlease.Client, error) {
	store, key, err := c.open(ctx, rawURL, true)
	if err != nil {
		return nil, err
	}
	opts := lf.options()
	if adjust != nil {
		adjust(&opts)
	}
	cl, err := newClient(store, key, opts, objlease.SessionOptions{Logger: log})
	if err != nil {
		store.Close()
		return nil, err
	}
	return cl, nil
}

// session starts a session on store that logs to the command's logger,
// and returns the options the flags give for its leases.
func (c *cli) session(store providers.Store, lf *leaseFlags) (*objlease.Session, objlease.Options, error) {
	opts := lf.options()
	sess, err := objlease.NewSession(store, objlease.SessionOptions{Logger: c.log})
	if err != nil {
		return nil, opts, err
	}
	return sess, opts, nil
}

// newClient returns a client for key in store with opts, on a session of
// its own with sopts (as objlease.New, which takes the default
// SessionOptions).
func newClient(store providers.Store, key string, opts objlease.Options, sopts objlease.SessionOptions) (*objlease.Client, error) {
	sess, err := objlease.NewSession(store, sopts)
	if err != nil {
		return nil, err
	}
	return sess.Client(key, opts)
}

// inProcess refuses a mem:// URL. Its store lives in the process that
// opened it, so every objlease process would get an empty store of its
// own: each acquire would get token 1, and nothing would be shared.
func inProcess(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil || !strings.EqualFold(u.Scheme, "mem") {
		return nil // providers.Open judges it
	}
	return &tagged{"mem:// stores live inside one process, so every objlease command would get an empty one of its own; use file:// to share leases between processes on one machine", errInProcess}
}

// storeURL is rawURL, or, if it is a plain path (/var/lock/job, ./x, ../x,
// x/y, x: no "scheme:" before its first slash), the file:// URL of that
// path made absolute, as flock(1) takes a file. A trailing slash is kept:
// it names a directory, as a prefix. "mem:b/k" or "s4://b/k" have a scheme
// and stay as they are, for providers.Open to judge.
func storeURL(rawURL string) string {
	if !isPath(rawURL) {
		return rawURL
	}
	abs, err := filepath.Abs(rawURL)
	if err != nil {
		return rawURL
	}
	abs = filepath.ToSlash(abs)
	if strings.HasSuffix(rawURL, "/") && !strings.HasSuffix(abs, "/") {
		abs += "/"
	}
	if !strings.HasPrefix(abs, "/") {
		abs = "/" + abs // a Windows path: file:///C:/x
	}
	return (&url.URL{Scheme: "file", Path: abs}).String()
}

// climbs refuses a plain path with ".." after a name (d/bad/../x): made
// absolute it would be cleaned as text, which is not what the kernel makes
// of it after a symbolic link. A leading "../" is the shell's, and kept.
func climbs(rawURL string) error {
	if !isPath(rawURL) {
		return nil
	}
	named := false
	for seg := range strings.SplitSeq(filepath.ToSlash(rawURL), "/") {
		switch {
		case seg == ".." && named:
			return usagef("path %q has a \"..\" after a name: give the directory without it", rawURL)
		case seg != "" && seg != "." && seg != "..":
			named = true
		}
	}
	return nil
}

// isPath reports whether rawURL is a plain path rather than a URL.
func isPath(rawURL string) bool {
	if rawURL == "" || strings.Contains(rawURL, "://") {
		return false
	}
	if filepath.IsAbs(rawURL) || strings.HasPrefix(rawURL, "/") || strings.HasPrefix(rawURL, ".") {
		return true
	}
	i := strings.IndexAny(rawURL, ":/")
	return i < 0 || rawURL[i] == '/'
}
