package file

// This file holds the read path: Read, Stat and List, which take no lock
// unless they find a write in progress.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/objlease/objlease/providers/driver"
)

// read returns the object at key, settling an interrupted write under the
// lock if it finds one. The caller closes the object.
func (s *store) read(ctx context.Context, op string, f paths) (*object, error) {
	o, settled, err := look(f)
	if err == nil && !settled {
		var unlock func()
		unlock, err = s.lock(ctx, op, f, false)
		if errors.Is(err, errNoDir) {
			return &object{attrs: driver.Attrs{Key: f.key}}, nil
		}
		if err != nil {
			return nil, err
		}
		defer unlock()
		o, err = settle(f)
	}
	if err != nil {
		if _, ok := err.(*driver.Error); ok {
			return nil, err
		}
		return nil, &driver.Error{Op: op, Key: f.key, Err: err}
	}
	return o, nil
}

// existing returns the object at key, or ErrNotFound for op if there is
// none: the start of Read and Stat. The caller closes the object.
func (s *store) existing(ctx context.Context, op, key string) (*object, error) {
	f, err := s.files(op, key)
	if err != nil {
		return nil, err
	}
	o, err := s.read(ctx, op, f)
	if err != nil {
		return nil, err
	}
	if !o.exists() {
		o.close()
		return nil, driver.Wrap(op, key, driver.ErrNotFound, nil)
	}
	return o, nil
}

// Read implements driver.Driver. Reads take no lock unless they find a
// write in progress: object files are never changed in place, only
// replaced by rename.
func (s *store) Read(ctx context.Context, key string, maxBytes int64) (_ *driver.Reader, err error) {
	defer refused(&err)
	o, err := s.existing(ctx, "get", key)
	if err != nil {
		return nil, err
	}
	defer o.close()
	if maxBytes > 0 && o.attrs.Size > maxBytes {
		// Bucket would refuse it; do not read it first.
		return &driver.Reader{Attrs: o.attrs, Body: io.NopCloser(strings.NewReader(""))}, nil
	}
	data, err := o.data()
	if err != nil {
		return nil, &driver.Error{Op: "get", Key: key, Err: err}
	}
	return driver.NewBytesReader(o.attrs, data), nil
}

// Stat implements driver.Driver.
func (s *store) Stat(ctx context.Context, key string) (_ *driver.Attrs, err error) {
	defer refused(&err)
	o, err := s.existing(ctx, "stat", key)
	if err != nil {
		return nil, err
	}
	defer o.close()
	return &o.attrs, nil
}

// List implements driver.Driver. The page token is the last key returned.
func (s *store) List(ctx context.Context, prefix, pageToken string, pageSize int) (_ driver.ListPage, err error) {
	defer refused(&err)
	if pageSize <= 0 {
		pageSize = 1000
	}
	// Start in the directory named by prefix's complete segments.
	dirKey := prefix[:strings.LastIndex(prefix, "/")+1]
	if dirKey != "" {
		if why := checkKey(strings.TrimSuffix(dirKey, "/")); why != "" {
			return driver.ListPage{}, driver.Wrap("list", prefix, fmt.Errorf("%w: %s", driver.ErrInvalidKey, why), nil)
		}
	}
	l := lister{ctx: ctx, s: s, prefix: prefix, token: pageToken, size: pageSize}
	if err := l.walk(dirKey); err != nil && err != errPageFull {
		return driver.ListPage{}, err
	}
	return l.page, nil
}

var errPageFull = errors.New("page full")

// readDir is os.ReadDir, unsorted.
func readDir(dir string) ([]fs.DirEntry, error) {
	d, err := openFile(dir, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.ReadDir(-1)
}

type lister struct {
	ctx           context.Context
	s             *store
	prefix, token string
	size          int
	page          driver.ListPage
}

// walk adds the objects under dirKey (a key prefix ending in '/', or "") to
// the page in lexical key order.
func (l *lister) walk(dirKey string) error {
	if err := l.ctx.Err(); err != nil {
		return &driver.Error{Op: "list", Key: l.prefix, Err: context.Cause(l.ctx)}
	}
	entries, err := readDir(join(l.s.dir(), dirKey))
	if absent(err) {
		return nil // removed while we walked, or never there
	}
	if err != nil {
		return &driver.Error{Op: "list", Key: l.prefix, Err: err}
	}
	// Keys under directory "a" start with "a/", and '/' sorts between other
	// bytes, so order directories by name+"/".
	sortName := func(e fs.DirEntry) string {
		if e.IsDir() {
			return e.Name() + "/"
		}
		return e.Name()
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(sortName(a), sortName(b)) })
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), reserved) {
			continue // sidecars, locks and pending files, never objects
		}
		key := dirKey + sortName(e)
		switch {
		case !strings.HasPrefix(key, l.prefix):
			continue
		case e.IsDir():
			// Descend unless every key below sorts at or before the token.
			if key > l.token || strings.HasPrefix(l.token, key) {
				if err := l.walk(key); err != nil {
					return err
				}
			}
		case e.Type().IsRegular() && key > l.token:
			if err := l.add(key); err != nil {
				return err
			}
		}
	}
	return nil
}

func (l *lister) add(key string) error {
	if len(l.page.Objects) == l.size {
		l.page.NextToken = l.page.Objects[l.size-1].Key
		return errPageFull
	}
	f, err := l.s.files("list", key)
	if err != nil {
		return nil // a name no key can have (a NUL byte cannot occur)
	}
	o, err := l.s.read(l.ctx, "list", f)
	if err != nil {
		if l.ctx.Err() != nil {
			return err
		}
		// One unreadable file does not hide the rest of the tree.
		return nil
	}
	o.close()
	if o.exists() {
		l.page.Objects = append(l.page.Objects, o.attrs)
	}
	return nil
}
