package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildHello builds testdata/hello (one module dependency) for linux on
// each architecture, as the release builds its binaries.
func buildHello(t *testing.T, dir string) map[string]string {
	t.Helper()
	bins := map[string]string{}
	for _, arch := range []string{"amd64", "arm64"} {
		out := filepath.Join(dir, "hello-"+arch)
		cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w -buildid=", "-o", out, "./testdata/hello")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build for %s: %v\n%s", arch, err, b)
		}
		bins[arch] = out
	}
	return bins
}

func buildLayout(t *testing.T, dir string, args ...string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	certs := filepath.Join(dir, "certs.crt")
	license := filepath.Join(dir, "LICENSE")
	os.WriteFile(certs, []byte("-----BEGIN CERTIFICATE-----\n"), 0o644)
	os.WriteFile(license, []byte("Apache License\n"), 0o644)
	out := filepath.Join(dir, "objlease_v9.9.9_image.oci.tar")
	all := append([]string{"-version", "v9.9.9", "-revision", "abc", "-certs", certs, "-license", license, "-out", out, "-sbom-dir", dir}, args...)
	if err := build(all); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestImageLayout builds a two-platform layout twice (the same bytes),
// checks it, loads one platform's docker archive's manifest, and makes
// check fail on a binary of the wrong machine.
func TestImageLayout(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1764720000")
	tmp := t.TempDir()
	bins := buildHello(t, tmp)
	plats := []string{"linux/amd64=" + bins["amd64"], "linux/arm64=" + bins["arm64"]}
	one := buildLayout(t, filepath.Join(tmp, "one"), plats...)
	two := buildLayout(t, filepath.Join(tmp, "two"), plats...)
	a, _ := os.ReadFile(one)
	b, _ := os.ReadFile(two)
	if !bytes.Equal(a, b) {
		t.Fatal("two builds of the same layout differ")
	}
	if err := check(one, filepath.Join(tmp, "one")); err != nil {
		t.Fatalf("check: %v", err)
	}
	// A build of one platform has that platform's manifest.
	amd := buildLayout(t, filepath.Join(tmp, "amd64"), plats[0])
	if err := contains(one, amd); err != nil {
		t.Fatalf("contains: %v", err)
	}
	if err := contains(amd, one); err == nil {
		t.Error("contains: a one-platform layout contains a two-platform one")
	}

	// The docker archive: manifest.json names the config and the layer.
	dockerTar := filepath.Join(tmp, "docker.tar")
	if err := dockerArchive(one, "linux/arm64", "objlease/objlease:test", dockerTar); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(dockerTar)
	if err != nil {
		t.Fatal(err)
	}
	files, err := readTar(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	var m []struct {
		Config           string
		RepoTags, Layers []string
	}
	if err := json.Unmarshal(files["manifest.json"], &m); err != nil || len(m) != 1 {
		t.Fatalf("manifest.json: %v %s", err, files["manifest.json"])
	}
	var cfg imageConfig
	if err := json.Unmarshal(files[m[0].Config], &cfg); err != nil || cfg.Architecture != "arm64" || cfg.Config.User != "65532:65532" {
		t.Errorf("config %s: %v %+v", m[0].Config, err, cfg)
	}
	if len(m[0].Layers) != 1 || files[m[0].Layers[0]] == nil || m[0].RepoTags[0] != "objlease/objlease:test" {
		t.Errorf("manifest.json: %+v", m[0])
	}

	// An amd64 binary labelled arm64 fails the check.
	bad := buildLayout(t, filepath.Join(tmp, "bad"), "linux/arm64="+bins["amd64"])
	err = check(bad, filepath.Join(tmp, "bad"))
	if err == nil || !strings.Contains(err.Error(), "EM_X86_64, not arm64") {
		t.Errorf("check of an amd64 binary in the arm64 image: %v", err)
	}
}
