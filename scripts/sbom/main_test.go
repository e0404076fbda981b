package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/objlease/objlease/scripts/internal/spdx"
)

// TestSBOMListsGoVersionModules writes the SBOM of a binary with one
// module dependency: the same bytes twice, Check passes, and it fails
// once a module is missing or its hash differs.
func TestSBOMListsGoVersionModules(t *testing.T) {
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "hello")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "../ociimage/testdata/hello")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	b, err := spdx.ReadBinary(bin)
	if err != nil {
		t.Fatal(err)
	}
	opts := spdx.Options{Name: "hello.tar.gz", Namespace: "https://example.com/spdx", Version: "v9.9.9", Revision: "abc", Created: time.Unix(1764720000, 0)}
	data := spdx.Marshal(spdx.New(b, opts))
	if again := spdx.Marshal(spdx.New(b, opts)); !bytes.Equal(data, again) {
		t.Fatal("two SBOMs of the same binary differ")
	}
	path := filepath.Join(tmp, "hello.spdx.json")
	os.WriteFile(path, data, 0o644)
	if err := Check(path, bin); err != nil {
		t.Fatalf("Check: %v", err)
	}
	var doc spdx.Document
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.CreationInfo.Created != "2025-12-03T00:00:00Z" {
		t.Errorf("version %q, created %q", doc.SPDXVersion, doc.CreationInfo.Created)
	}
	mods := spdx.Modules(&doc)
	if len(mods) != 1 || mods[0].Path != "github.com/creack/pty" || !strings.HasPrefix(mods[0].Sum, "h1:") {
		t.Fatalf("modules: %+v", mods)
	}

	for name, edit := range map[string]func(*spdx.Document){
		"a module missing": func(d *spdx.Document) { d.Packages = d.Packages[:2] },
		"another hash":     func(d *spdx.Document) { d.Packages[2].Comment = "go.sum: h1:AAAA" },
	} {
		var d spdx.Document
		json.Unmarshal(data, &d)
		edit(&d)
		os.WriteFile(path, spdx.Marshal(&d), 0o644)
		if err := Check(path, bin); err == nil || !strings.Contains(err.Error(), "github.com/creack/pty") {
			t.Errorf("%s: Check: %v", name, err)
		}
	}
}
