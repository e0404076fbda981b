package emulator

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tb records how check ended a test, without ending this one.
type tb struct {
	testing.TB
	how string
}

type ended struct{}

func (v *tb) Fatal(...any) { v.how = "fatal"; panic(ended{}) }
func (v *tb) Skip(...any)  { v.how = "skip"; panic(ended{}) }

func (v *tb) check(err error) {
	defer func() {
		if r := recover(); r != nil && r != (ended{}) {
			panic(r)
		}
	}()
	check(v, err)
}

// Asked for containers without an engine, the harness fails in CI and
// skips elsewhere, and never quietly runs local processes instead.
func TestNoEngineFailsInCIAndSkipsElsewhere(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix://"+t.TempDir()+"/no-engine.sock")
	_, err := dialEngine()
	var engine *engineError
	if !errors.As(err, &engine) {
		t.Fatalf("dialEngine without an engine = %v, want an *engineError", err)
	}
	for ci, want := range map[string]string{"true": "fatal", "": "skip"} {
		t.Setenv("CI", ci)
		v := &tb{TB: t}
		v.check(err)
		if v.how != want {
			t.Errorf("CI=%q: no engine ended the test with %q, want %q", ci, v.how, want)
		}
	}
}

// The images the harness runs are the versions the scripts install and
// build: a version bumped in one place only fails here.
func TestImagesArePinnedInTheScripts(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "..", "scripts", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	build, install := read("containers.sh"), read("install-emulators.sh")
	for _, image := range []string{versityGWImage, fakeGCSImage, azuriteImage} {
		repo, tag, _ := strings.Cut(image, ":")
		version := strings.TrimPrefix(tag, "v")
		if !strings.Contains(build, repo+":") || !strings.Contains(build, "_version="+tag) && !strings.Contains(build, "_version=v"+tag) {
			t.Errorf("scripts/containers.sh does not build %s", image)
		}
		if !strings.Contains(install, version) {
			t.Errorf("scripts/install-emulators.sh does not install version %s of %s", version, repo)
		}
	}
}
