package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/providers"
)

// humanAge prints an age as kubectl does: 45s, 2m, 3h20m, 5d. A negative
// age (a store whose Last-Modified has one-second resolution is ahead of
// its Date by up to a second) prints as 0s.
func humanAge(d time.Duration) string {
	if d < time.Second {
		return "0s"
	}
	s := int64(d / time.Second)
	m, h := s/60, s/3600
	switch {
	case s < 120:
		return fmt.Sprintf("%ds", s)
	case m < 10:
		if s%60 == 0 {
			return fmt.Sprintf("%dm", m)
		}
		return fmt.Sprintf("%dm%ds", m, s%60)
	case m < 180:
		return fmt.Sprintf("%dm", m)
	case h < 8:
		if m%60 == 0 {
			return fmt.Sprintf("%dh", h)
		}
		return fmt.Sprintf("%dh%dm", h, m%60)
	case h < 48:
		return fmt.Sprintf("%dh", h)
	case h < 24*8:
		if h%24 == 0 {
			return fmt.Sprintf("%dd", h/24)
		}
		return fmt.Sprintf("%dd%dh", h/24, h%24)
	case h < 24*365*2:
		return fmt.Sprintf("%dd", h/24)
	}
	return fmt.Sprintf("%dy%dd", h/(24*365), (h/24)%365)
}

// roundDuration is a wait to print: tenths of a second below a minute,
// else as humanAge.
func roundDuration(d time.Duration) string {
	if d < time.Minute {
		return max(d, 0).Round(100 * time.Millisecond).String()
	}
	return humanAge(d)
}

// stamp is a time to print: seconds, UTC.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func (c *cli) printJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.stdout, "%s\n", b)
	return err
}

// showHolder is a record's holder to print in a row: "-" if none, quoted
// as a Go string if it is not one objlease accepts (a record written by
// another writer may hold a newline or a control character, which would
// split or forge a row).
func showHolder(h string) string {
	if h != "" && objlease.CheckHolder(h) != nil {
		return strconv.Quote(h)
	}
	return orDash(h)
}

// showData is the data a holder stored in its record, to print in a row:
// "-" if none, else quoted as a Go string, cut at 40 bytes.
func showData(b []byte) string {
	if len(b) == 0 {
		return "-"
	}
	if len(b) > 40 {
		return strconv.Quote(string(b[:40])) + "..."
	}
	return strconv.Quote(string(b))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
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

// client opens the lease at rawURL with the options the flags give.
func (c *cli) client(ctx context.Context, lf *leaseFlags, rawURL string) (*objlease.Client, error) {
	store, key, err := c.open(ctx, rawURL, true)
	if err != nil {
		return nil, err
	}
	cl, err := objlease.New(store, key, lf.options(c.log))
	if err != nil {
		store.Close()
		return nil, err
	}
	return cl, nil
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

// listFormat is how a list-like command (list, group) prints: a table,
// optionally wide and without its header line, or one JSON document.
type listFormat struct {
	json      bool // -o json: one {"kind":"<Kind>List","items":[...]} document
	wide      bool // -o wide: the table with more columns
	noHeaders bool // --no-headers: the table without its header line
}

// addListOutput registers -o (json, wide, or text when not given) and
// --no-headers, for commands that print a table of many things.
func addListOutput(fs *flagSet) *listFormat {
	lf := new(listFormat)
	fs.Func("o", "output `format`: json (one document with every row) or wide (more columns); a table when not given", func(s string) error {
		switch s {
		case "text":
			*lf = listFormat{noHeaders: lf.noHeaders}
		case "json":
			lf.json, lf.wide = true, false
		case "wide":
			lf.json, lf.wide = false, true
		default:
			return fmt.Errorf("want json or wide")
		}
		return nil
	})
	fs.BoolVar(&lf.noHeaders, "no-headers", false, "print the table without its header line")
	return lf
}

// header prints a table's header line unless --no-headers.
func (lf *listFormat) header(w io.Writer, cols ...string) {
	if !lf.noHeaders {
		fmt.Fprintln(w, strings.Join(cols, "\t"))
	}
}

// printList prints items, a slice, as one JSON document
// {"kind":kind,"items":[...]}, as kubectl prints a list: kind is the
// list's kind, e.g. "LeaseList". No items is an empty array, never null.
func (c *cli) printList(kind string, items any) error {
	if v := reflect.ValueOf(items); !v.IsValid() || (v.Kind() == reflect.Slice && v.Len() == 0) {
		items = []struct{}{}
	}
	return c.printJSON(struct {
		Kind  string `json:"kind"`
		Items any    `json:"items"`
	}{kind, items})
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
