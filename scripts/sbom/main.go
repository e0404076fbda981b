// Command sbom writes the SPDX 2.3 (JSON) software bill of materials of a
// release binary: the binary (its SHA-256, version and commit), the Go
// standard library and every module of its build information (what go
// version -m prints: path, version, go.sum hash). The same binary, name,
// version and time give the same bytes. scripts/release.sh writes one
// beside each archive.
//
// With -check it reads an SBOM instead and fails unless its modules are
// exactly those go version -m prints for the binary, and its checksum is
// the binary's. The binary may be given as the release archive that
// holds it (.tar.gz or .zip).
//
// Usage:
//
//	go run ./scripts/sbom -name NAME -version VERSION -revision COMMIT BINARY > NAME.spdx.json
//	go run ./scripts/sbom -check SBOM BINARY|ARCHIVE
//
// The document's time is SOURCE_DATE_EPOCH (default 0).
package main

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/objlease/objlease/scripts/internal/spdx"
)

func main() {
	name := flag.String("name", "", "the document's name: the file it describes")
	version := flag.String("version", "", "the release version")
	revision := flag.String("revision", "", "the commit")
	check := flag.String("check", "", "check this SBOM against the binary instead of writing one")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: sbom -name NAME -version VERSION -revision COMMIT BINARY | sbom -check SBOM BINARY")
		os.Exit(2)
	}
	bin := flag.Arg(0)
	if *check != "" {
		if strings.HasSuffix(bin, ".tar.gz") || strings.HasSuffix(bin, ".zip") {
			tmp, err := os.MkdirTemp("", "sbom-check")
			if err != nil {
				fmt.Fprintln(os.Stderr, "sbom:", err)
				os.Exit(1)
			}
			defer os.RemoveAll(tmp)
			if bin, err = extractBinary(bin, tmp); err != nil {
				fmt.Fprintln(os.Stderr, "sbom:", err)
				os.RemoveAll(tmp)
				os.Exit(1)
			}
		}
		if err := Check(*check, bin); err != nil {
			fmt.Fprintln(os.Stderr, "sbom:", err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "sbom: %s lists the modules of go version -m %s\n", *check, flag.Arg(0))
		return
	}
	if *name == "" || *version == "" {
		fmt.Fprintln(os.Stderr, "sbom: -name and -version are required")
		os.Exit(2)
	}
	created, err := sourceDate()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sbom:", err)
		os.Exit(1)
	}
	b, err := spdx.ReadBinary(bin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sbom:", err)
		os.Exit(1)
	}
	doc := spdx.New(b, spdx.Options{
		Name:      *name,
		Namespace: "https://github.com/objlease/objlease/releases/" + *version + "/spdx",
		Version:   *version,
		Revision:  *revision,
		Created:   created,
	})
	os.Stdout.Write(spdx.Marshal(doc))
}

func sourceDate() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: %v", s, err)
	}
	return time.Unix(n, 0), nil
}

// Check fails unless the SBOM at path describes the binary at bin: its
// SHA-256 and exactly the modules go version -m prints.
func Check(path, bin string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc spdx.Document
	if err := json.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	b, err := spdx.ReadBinary(bin)
	if err != nil {
		return err
	}
	found := false
	for _, p := range doc.Packages {
		if p.SPDXID == "SPDXRef-Package-objlease" && len(p.Checksums) == 1 && p.Checksums[0].ChecksumValue == b.SHA256 {
			found = true
		}
	}
	if !found {
		return fmt.Errorf("%s does not give %s's SHA-256 (%s)", path, bin, b.SHA256)
	}
	want, err := spdx.GoVersionModules(bin)
	if err != nil {
		return err
	}
	if len(want) == 0 {
		return fmt.Errorf("go version -m %s prints no modules", bin)
	}
	if d := spdx.Diff(spdx.Modules(&doc), want); d != "" {
		return fmt.Errorf("%s does not list the modules of go version -m %s:\n%s", path, bin, d)
	}
	return nil
}

// extractBinary writes the objlease binary of a release archive into dir
// and returns its path.
func extractBinary(archive, dir string) (string, error) {
	out := filepath.Join(dir, "objlease")
	write := func(r io.Reader) (string, error) {
		f, err := os.Create(out)
		if err != nil {
			return "", err
		}
		if _, err := io.Copy(f, r); err != nil {
			f.Close()
			return "", err
		}
		return out, f.Close()
	}
	isBinary := func(name string) bool {
		b := path.Base(name)
		return b == "objlease" || b == "objlease.exe"
	}
	if strings.HasSuffix(archive, ".zip") {
		zr, err := zip.OpenReader(archive)
		if err != nil {
			return "", err
		}
		defer zr.Close()
		for _, f := range zr.File {
			if isBinary(f.Name) {
				r, err := f.Open()
				if err != nil {
					return "", err
				}
				defer r.Close()
				return write(r)
			}
		}
		return "", fmt.Errorf("%s holds no objlease binary", archive)
	}
	f, err := os.Open(archive)
	if err != nil {
		return "", err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return "", fmt.Errorf("%s: %v", archive, err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return "", fmt.Errorf("%s holds no objlease binary", archive)
		}
		if err != nil {
			return "", fmt.Errorf("%s: %v", archive, err)
		}
		if h.Typeflag == tar.TypeReg && isBinary(h.Name) {
			return write(tr)
		}
	}
}
