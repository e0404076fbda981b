package file

// This file holds how a key becomes the files that hold it: the key's
// checks, the object's paths beside its data file, and path text that is
// joined and split but never cleaned, as the kernel resolves it.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/objlease/objlease/providers/driver"
)

// CheckKey implements driver.KeyChecker: keys are paths below the
// root, so they must not climb out of it or name the store's own files.
// (Bucket has refused empty keys, a leading '/' and control characters.)
func (s *store) CheckKey(key string) error {
	if why := checkKey(key); why != "" {
		return errors.New(why)
	}
	return nil
}

// checkKey says what is wrong with key, or "" if nothing is.
func checkKey(key string) string {
	switch {
	case key == "":
		return "empty key"
	case strings.ContainsRune(key, 0):
		return "key contains a NUL byte"
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch {
		case seg == "":
			return "key has an empty path segment"
		case seg == "." || seg == "..":
			return fmt.Sprintf("key has a %q path segment", seg)
		case strings.HasPrefix(seg, reserved):
			return fmt.Sprintf("path segments starting with %q are reserved for the store", reserved)
		case len(seg) > maxName:
			return "key has a path segment longer than 255 bytes"
		}
		if why := platformSegment(seg); why != "" {
			return why
		}
	}
	return ""
}

// paths are the files that make up one object.
type paths struct {
	key, dir   string
	data       string // the object's bytes
	attrs      string // its sidecar
	lock       string
	pending    string // new data, before it is renamed over data
	attrsNew   string // new sidecar, before it is renamed over attrs
	legacyLock string // the per-root lock of earlier releases
}

// aux names the store's file of the given kind beside the object file name.
func aux(kind, name string) string {
	n := reserved + "-" + kind + "." + name
	if len(n) > maxName {
		sum := sha256.Sum256([]byte(name))
		n = reserved + "-" + kind + "#" + hex.EncodeToString(sum[:])
	}
	return n
}

// files returns the files that hold key.
func (s *store) files(op, key string) (paths, error) {
	if why := checkKey(key); why != "" {
		return paths{}, driver.Wrap(op, key, fmt.Errorf("%w: %s", driver.ErrInvalidKey, why), nil)
	}
	var p string
	if pathLock() {
		p = resolve(join(s.root, key))
		// A symbolic link may take a key anywhere inside the store's
		// directory, never out of it: a write there would replace a file
		// that is no object of the store's.
		if root := s.dir(); !below(root, p) {
			return paths{}, driver.Wrap(op, key, fmt.Errorf("%w: a symbolic link takes it to %s, outside the store's directory %s", driver.ErrInvalidKey, p, root), nil)
		}
	} else {
		p = join(s.dir(), key)
	}
	dir, name := split(p)
	sum := sha256.Sum256([]byte(key))
	return paths{
		key:        key,
		dir:        dir,
		data:       p,
		attrs:      join(dir, aux("attrs", name)),
		lock:       join(dir, aux("lock", name)),
		pending:    join(dir, aux("pending", name)),
		attrsNew:   join(dir, aux("attrs-new", name)),
		legacyLock: join(join(s.dir(), lockDir), hex.EncodeToString(sum[:])),
	}, nil
}

// Paths are only ever resolved by resolve, the way the kernel resolves
// them, never cleaned as text: where "l" is a symbolic link to "a/b",
// "l/.." is "a", while filepath.Clean would make it ".". join and split
// therefore leave the text of a path alone.

// join is dir/name, without cleaning.
func join(dir, name string) string {
	switch {
	case name == "":
		return dir
	case strings.HasSuffix(dir, "/"):
		return dir + name
	}
	return dir + "/" + name
}

// split divides p at its last '/' into directory and name, without
// cleaning.
func split(p string) (dir, name string) {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return "/", p // paths here are absolute
	}
	dir, name = p[:i], p[i+1:]
	if dir == "" {
		dir = "/"
	}
	return dir, name
}

// parent is p's directory, without cleaning.
func parent(p string) string {
	dir, _ := split(strings.TrimRight(p, "/"))
	return dir
}

// prune removes dir and its parents while they are empty, never the root
// or anything outside it.
func (s *store) prune(dir string) {
	root := s.dir()
	for d := resolve(dir); below(root, d) && os.Remove(d) == nil; d = parent(d) {
	}
}

// below reports whether p lies under the store's root.
func (s *store) below(p string) bool { return below(s.dir(), resolve(p)) }

// below reports whether the resolved path p lies under the resolved
// directory root.
func below(root, p string) bool {
	return strings.HasPrefix(p, strings.TrimSuffix(root, "/")+"/")
}
