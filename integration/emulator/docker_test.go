package emulator

import (
	"errors"
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
