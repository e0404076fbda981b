//go:build linux && objlease_image

// Package image tests the objlease container image (scripts/ociimage,
// loaded by scripts/image.sh) in a Docker engine, against the S3 emulator in a
// container: run, elect and group join as they run in a Deployment or a
// Job, stopped by the engine and taken over by a second container.
//
// scripts/test.sh runs it in its container step, with the image it has
// just built:
//
//	OBJLEASE_EMULATORS=docker OBJLEASE_IMAGE=objlease/objlease:v0.1.0 \
//	  go test -tags objlease_image ./image/
package image

import (
	"bytes"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/objlease/objlease/integration/emulator"
)

func TestMain(m *testing.M) {
	code := m.Run()
	emulator.StopAll()
	os.Exit(code)
}

// stopTimeout is docker stop's grace before SIGKILL, as a Kubernetes
// pod's terminationGracePeriodSeconds.
const stopTimeout = 10

func image(t *testing.T) string {
	img := os.Getenv("OBJLEASE_IMAGE")
	if img == "" {
		t.Fatal("OBJLEASE_IMAGE is not set: build the image with scripts/image.sh and name it there")
	}
	return img
}

// docker runs the docker CLI and returns its stdout.
func docker(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("docker", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, &stderr)
	}
	return strings.TrimSpace(stdout.String())
}

// store is the emulator's bucket as the containers reach it (they share
// the host's network, as the emulator does).
type store struct {
	e   *emulator.S3
	env []string // docker run -e flags
}

func newStore(t *testing.T) *store {
	e := emulator.VersityGW(t)
	return &store{e: e, env: []string{
		"-e", "AWS_ACCESS_KEY_ID=" + e.AccessKey, "-e", "AWS_SECRET_ACCESS_KEY=" + e.SecretKey,
	}}
}

func (s *store) url(key string) string {
	return "s3://" + s.e.Bucket + "/" + key + "?endpoint=" + url.QueryEscape(s.e.Endpoint) + "&region=" + s.e.Region
}

// start runs the image detached with args and returns the container's
// name; it is removed when the test ends.
func (s *store) start(t *testing.T, name string, args ...string) string {
	t.Helper()
	name = "objlease-image-test-" + name + "-" + strings.ToLower(strings.ReplaceAll(emulator.Prefix(t), "/", ""))
	name = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, name)
	run := append([]string{"run", "-d", "--name", name, "--network", "host"}, s.env...)
	docker(t, append(append(run, image(t)), args...)...)
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := exec.Command("docker", "logs", name).CombinedOutput()
			t.Logf("docker logs %s:\n%s", name, out)
		}
		exec.Command("docker", "rm", "-f", name).Run()
	})
	return name
}

// record is what inspect -o json prints, in part.
type record struct {
	State  string `json:"state"`
	Holder string `json:"holder"`
	Token  uint64 `json:"token"`
}

// inspect reads the record at key with the image's own inspect.
func (s *store) inspect(t *testing.T, key string) record {
	t.Helper()
	run := append([]string{"run", "--rm", "--network", "host"}, s.env...)
	out := docker(t, append(run, image(t), "inspect", "-o", "json", s.url(key))...)
	var r record
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("inspect %s: %v: %q", key, err, out)
	}
	return r
}

// await polls the record at key until ok says so (a minute at most).
func (s *store) await(t *testing.T, key, what string, ok func(record) bool) record {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		r := s.inspect(t, key)
		if ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the record at %s is %+v after a minute", what, key, r)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// stop is docker stop: SIGTERM to objlease as PID 1, SIGKILL after
// stopTimeout. It fails t unless objlease ended by itself with status
// want: run and elect exit with their command's (0 here: watch ends
// normally on SIGTERM), group join with 143 (128 + SIGTERM).
func stop(t *testing.T, name string, want int) {
	t.Helper()
	docker(t, "stop", "-t", strconv.Itoa(stopTimeout), name)
	state := docker(t, "inspect", "--format", "{{.State.ExitCode}} {{.State.OOMKilled}}", name)
	if state != strconv.Itoa(want)+" false" {
		t.Errorf("%s after docker stop: exit code and OOM %q, want %d (137: the engine had to kill it)", name, state, want)
	}
}

// The command of the containers below: objlease itself (the image has no
// shell), watching the lease until it is signalled.
func watchCmd(s *store, key string) []string {
	return []string{"--", "/usr/local/bin/objlease", "watch", s.url(key)}
}

// A Deployment's pod under run: docker stop releases the lease before the
// engine's timeout, and the second container takes it over with the next
// token at once, not after the TTL.
func TestImageRunStoppedHandsOver(t *testing.T) {
	s := newStore(t)
	key := emulator.Prefix(t) + "run"
	a := s.start(t, "run-a", append([]string{"run", "--holder", "a", "--ttl", "30s", s.url(key)}, watchCmd(s, key)...)...)
	first := s.await(t, key, "first container", func(r record) bool { return r.State == "held" && r.Holder == "a" })
	s.start(t, "run-b", append([]string{"run", "--holder", "b", "--ttl", "30s", s.url(key)}, watchCmd(s, key)...)...)
	stop(t, a, 0)
	if r := s.inspect(t, key); r.Holder == "a" && r.State != "released" {
		t.Errorf("after docker stop the first container left %+v, want it released", r)
	}
	// 30 s TTL: a takeover within the minute of await that is not from a
	// release would have to wait for expiry, and inspect shows which.
	second := s.await(t, key, "second container", func(r record) bool { return r.State == "held" && r.Holder == "b" })
	if second.Token != first.Token+1 {
		t.Errorf("second container holds token %d, want %d", second.Token, first.Token+1)
	}
}

// A leader under elect hands over the same way.
func TestImageElectStoppedHandsOver(t *testing.T) {
	s := newStore(t)
	key := emulator.Prefix(t) + "leader"
	a := s.start(t, "elect-a", append([]string{"elect", "--holder", "a", "--ttl", "30s", s.url(key)}, watchCmd(s, key)...)...)
	first := s.await(t, key, "first leader", func(r record) bool { return r.State == "held" && r.Holder == "a" })
	s.start(t, "elect-b", append([]string{"elect", "--holder", "b", "--ttl", "30s", s.url(key)}, watchCmd(s, key)...)...)
	stop(t, a, 0)
	second := s.await(t, key, "second leader", func(r record) bool { return r.State == "held" && r.Holder == "b" })
	if second.Token != first.Token+1 {
		t.Errorf("second leader holds token %d, want %d", second.Token, first.Token+1)
	}
}

// A member of a shard group (an Indexed Job's pod) stopped by the engine
// releases its shard to the other member; a shard command that keeps
// failing is restarted without leaving a zombie under PID 1.
func TestImageGroupJoinStoppedHandsOver(t *testing.T) {
	s := newStore(t)
	prefix := emulator.Prefix(t) + "group"
	run := append([]string{"run", "--rm", "--network", "host"}, s.env...)
	docker(t, append(run, image(t), "group", "define", s.url(prefix), "s1")...)
	shard := prefix + "/shards/s1"
	a := s.start(t, "join-a", append([]string{"group", "join", "--member", "a", "--ttl", "30s", s.url(prefix)}, watchCmd(s, shard)...)...)
	first := s.await(t, shard, "first member", func(r record) bool { return r.State == "held" && r.Holder == "a" })
	s.start(t, "join-b", append([]string{"group", "join", "--member", "b", "--ttl", "30s", s.url(prefix)}, watchCmd(s, shard)...)...)
	stop(t, a, 143)
	second := s.await(t, shard, "second member", func(r record) bool { return r.State == "held" && r.Holder == "b" })
	if second.Token <= first.Token {
		t.Errorf("second member holds token %d, want above %d", second.Token, first.Token)
	}
}

// objlease as PID 1 reaps what ends under it: a shard command that fails
// at once is started again and again, and no process of the container is
// ever left a zombie.
func TestImagePID1LeavesNoZombie(t *testing.T) {
	s := newStore(t)
	prefix := emulator.Prefix(t) + "failing"
	run := append([]string{"run", "--rm", "--network", "host"}, s.env...)
	docker(t, append(run, image(t), "group", "define", s.url(prefix), "s1")...)
	// "objlease version extra" exits 64 at once: join starts it again
	// after its back-off (2 s, 4 s, ...), each time through a supervisor
	// of its own.
	c := s.start(t, "pid1", "group", "join", "--member", "a", "--ttl", "30s", s.url(prefix), "--", "/usr/local/bin/objlease", "version", "extra")
	// A process is a zombie for a moment between its end and its reaping:
	// one seen zombie at two looks half a second apart was not reaped.
	deadline := time.Now().Add(time.Minute)
	zombies := map[string]bool{}
	for starts := 0; starts < 3; {
		if time.Now().After(deadline) {
			t.Fatalf("the shard command failed %d times in a minute, want 3", starts)
		}
		time.Sleep(500 * time.Millisecond)
		logs, _ := exec.Command("docker", "logs", c).CombinedOutput()
		starts = strings.Count(string(logs), "shard command failed")
		seen := map[string]bool{}
		for _, line := range strings.Split(docker(t, "top", c, "-o", "pid,stat,args"), "\n")[1:] {
			if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], "Z") {
				if zombies[f[0]] {
					t.Fatalf("a zombie in the container, not reaped for half a second: %q", line)
				}
				seen[f[0]] = true
			}
		}
		zombies = seen
	}
	if pid := docker(t, "inspect", "--format", "{{.State.Pid}}", c); pid == "0" {
		t.Fatal("the container is not running")
	}
	stop(t, c, 143)
}
