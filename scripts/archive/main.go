// Command archive writes a release archive of a directory, the same bytes
// for the same files wherever it runs: entries in name order under
// PREFIX/, every time set to SOURCE_DATE_EPOCH (default 0), owner root,
// mode 0755 for executables and 0644 for the rest. OUT ending in .zip
// makes a zip, in .tar.gz a gzip'd tar (no name or time in the gzip
// header). scripts/release.sh uses it; tar and zip differ between systems
// in what they record.
//
// Usage: go run ./scripts/archive OUT DIR PREFIX
package main

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: go run ./scripts/archive OUT.tar.gz|OUT.zip DIR PREFIX")
		os.Exit(2)
	}
	if err := write(os.Args[1], os.Args[2], os.Args[3]); err != nil {
		fmt.Fprintln(os.Stderr, "archive:", err)
		os.Exit(1)
	}
}

type entry struct {
	name string // slash-separated, under the prefix
	path string
	mode int64
}

func write(out, dir, prefix string) error {
	mtime := time.Unix(0, 0).UTC()
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH=%q: %v", s, err)
		}
		mtime = time.Unix(n, 0).UTC()
	}
	var entries []entry
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return fmt.Errorf("%s: not a regular file", p)
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		mode := int64(0o644)
		if info.Mode()&0o111 != 0 || strings.HasSuffix(p, ".exe") {
			mode = 0o755
		}
		entries = append(entries, entry{name: path.Join(prefix, filepath.ToSlash(rel)), path: p, mode: mode})
		return nil
	})
	if err != nil {
		return err
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	switch {
	case strings.HasSuffix(out, ".zip"):
		err = writeZip(f, entries, mtime)
	case strings.HasSuffix(out, ".tar.gz"):
		err = writeTarGz(f, entries, mtime)
	default:
		err = fmt.Errorf("%s: want a name ending in .zip or .tar.gz", out)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(out)
	}
	return err
}

func writeZip(w io.Writer, entries []entry, mtime time.Time) error {
	z := zip.NewWriter(w)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate, Modified: mtime}
		h.SetMode(fs.FileMode(e.mode))
		dst, err := z.CreateHeader(h)
		if err != nil {
			return err
		}
		if err := copyFile(dst, e.path); err != nil {
			return err
		}
	}
	return z.Close()
}

func writeTarGz(w io.Writer, entries []entry, mtime time.Time) error {
	gz, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		info, err := os.Stat(e.path)
		if err != nil {
			return err
		}
		h := &tar.Header{Typeflag: tar.TypeReg, Name: e.name, Size: info.Size(), Mode: e.mode, ModTime: mtime, Uname: "root", Gname: "root", Format: tar.FormatUSTAR}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if err := copyFile(tw, e.path); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

func copyFile(dst io.Writer, p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(dst, f)
	return err
}
