package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// linkedModules lists the modules, other than this one, whose packages
// the command links when built for goos, as path@version: what go list
// -deps names.
func linkedModules(t *testing.T, goBin, goos string) []string {
	t.Helper()
	cmd := exec.Command(goBin, "list", "-deps", "-f", "{{with .Module}}{{if not .Main}}{{.Path}}@{{.Version}}{{end}}{{end}}", ".")
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH=amd64", "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("GOOS=%s go list -deps: %v", goos, err)
	}
	seen := map[string]bool{}
	var mods []string
	for _, m := range strings.Fields(string(out)) {
		if !seen[m] {
			seen[m] = true
			mods = append(mods, m)
		}
	}
	return mods
}

// TestReadmeModuleFigures checks what README.md says the first go run
// downloads: the number of modules the command links on Linux and on
// macOS and Windows, and the size of their zips in MB, against go list
// -deps and go mod download (which reads the module cache: the modules
// are there once the command is built).
func TestReadmeModuleFigures(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the build's modules: %v", err)
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	rx := regexp.MustCompile(`the\s+(\d+)\s+modules\s+the\s+command\s+links\s+on\s+Linux\s+\((\d+)\s+on\s+macOS\s+and\s+Windows\)[^.]*?,\s+(\d+)\s+MB\s+of\s+module\s+zips`)
	m := rx.FindStringSubmatch(readme)
	if m == nil {
		t.Fatalf("README.md has no sentence matching %q: the test reads its figures from there", rx)
	}
	linux := linkedModules(t, goBin, "linux")
	if got := strconv.Itoa(len(linux)); got != m[1] {
		t.Errorf("README.md says the command links %s modules on Linux; go list -deps names %s: write %s", m[1], got, got)
	}
	for _, goos := range []string{"darwin", "windows"} {
		if got := strconv.Itoa(len(linkedModules(t, goBin, goos))); got != m[2] {
			t.Errorf("README.md says the command links %s modules on macOS and Windows; for GOOS=%s go list -deps names %s", m[2], goos, got)
		}
	}

	// The zips' size, from the module cache (go mod download fetches what
	// is missing).
	cmd := exec.Command(goBin, append([]string{"mod", "download", "-json"}, linux...)...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download -json: %v", err)
	}
	var total int64
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var mod struct{ Path, Zip, Error string }
		if err := dec.Decode(&mod); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go mod download -json: %v", err)
		}
		if mod.Error != "" {
			t.Fatalf("go mod download %s: %s", mod.Path, mod.Error)
		}
		fi, err := os.Stat(mod.Zip)
		if err != nil {
			t.Fatal(err)
		}
		total += fi.Size()
	}
	mb := strconv.Itoa(int(math.Round(float64(total) / 1e6)))
	if mb != m[3] {
		t.Errorf("README.md says the modules' zips are %s MB; go mod download has %d bytes: write %s", m[3], total, mb)
	}
}
