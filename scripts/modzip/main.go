// Command modzip writes the zip a Go module proxy serves for the module in
// the current directory: every file named on standard input (one path a
// line, as git ls-files prints them) under MODULE@VERSION/, leaving out the
// directories that hold a module of their own. scripts/goinstall-check.sh
// uses it to serve this checkout from a file proxy, and
// scripts/modinstall-check.sh also runs it in k8s/ and gocron/ for those
// modules.
//
// Usage: git ls-files | go run ./scripts/modzip MODULE VERSION OUT.zip
package main

import (
	"archive/zip"
	"bufio"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: git ls-files | go run ./scripts/modzip MODULE VERSION OUT.zip")
		os.Exit(2)
	}
	if err := write(os.Args[1], os.Args[2], os.Args[3], os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "modzip:", err)
		os.Exit(1)
	}
}

func write(module, version, out string, list io.Reader) error {
	var files, nested []string
	sc := bufio.NewScanner(list)
	for sc.Scan() {
		f := sc.Text()
		if f == "" {
			continue
		}
		if path.Base(f) == "go.mod" && f != "go.mod" {
			nested = append(nested, path.Dir(f)+"/")
		}
		files = append(files, f)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	z, err := os.Create(out)
	if err != nil {
		return err
	}
	defer z.Close()
	w := zip.NewWriter(z)
	stamp := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
next:
	for _, f := range files {
		for _, n := range nested {
			if strings.HasPrefix(f, n) {
				continue next
			}
		}
		info, err := os.Lstat(f)
		if err != nil || !info.Mode().IsRegular() {
			continue // deleted in the work tree, or a link the proxy refuses
		}
		h := &zip.FileHeader{Name: module + "@" + version + "/" + f, Method: zip.Deflate, Modified: stamp}
		dst, err := w.CreateHeader(h)
		if err != nil {
			return err
		}
		src, err := os.Open(f)
		if err != nil {
			return err
		}
		_, err = io.Copy(dst, src)
		src.Close()
		if err != nil {
			return err
		}
	}
	return w.Close()
}
