//go:build linux

package main

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// shards returns /state's shards.
func (s *served) shards(t *testing.T) []string {
	t.Helper()
	var ids []string
	for _, v := range s.state(t)["shards"].([]any) {
		ids = append(ids, v.(string))
	}
	return ids
}

// A member whose shard lease was lost does not report the shard as its own
// while the shard's command, which ignores SIGTERM, runs out its --grace:
// /readyz and /state used to list it all that time, beside the member that
// had taken it over.
func TestHTTPGroupJoinLostShardNotOwned(t *testing.T) {
	dir := t.TempDir()
	url := "file://" + dir + "/g/"
	if out, err := exec.Command(objleaseBin(t), "group", "define", url, "s1").CombinedOutput(); err != nil {
		t.Fatalf("define: %v: %s", err, out)
	}
	pidFile := filepath.Join(dir, "pid")
	// b, second by name, owns s1 alone; its command ignores SIGTERM.
	b := serve(t, "group", "join", "--http", "127.0.0.1:0", "--member", "b", "--ttl", "2s", "--grace", "60s", url, "--",
		"sh", "-c", `trap "" TERM; echo $$ >`+pidFile+`; while :; do sleep 0.05; done`)
	t.Cleanup(func() {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				syscall.Kill(-pid, syscall.SIGKILL)
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	until(t, "b owns s1", func() bool { return slices.Equal(b.shards(t), []string{"s1"}) })
	until(t, "s1's command runs", func() bool { _, err := os.Stat(pidFile); return err == nil })

	// The shard's lease is broken: b's next renewal is refused, and its
	// command gets SIGTERM, which it ignores for the 60 s of --grace.
	if out, err := exec.Command(objleaseBin(t), "break", "--force", url+"shards/s1").CombinedOutput(); err != nil {
		t.Fatalf("break: %v: %s", err, out)
	}
	until(t, "b stops s1's command", func() bool { return strings.Contains(b.errText(), "shard s1 lost") })
	if sh := b.shards(t); len(sh) != 0 {
		t.Fatalf("b lists %v as its own after the shard's lease was lost:\n%s", sh, b.errText())
	}
	// a joins, first by name: its share is the one shard, which is free.
	a := serve(t, "group", "join", "--http", "127.0.0.1:0", "--member", "a", "--ttl", "2s", url, "--", "sleep", "3600")
	until(t, "a owns s1", func() bool { return slices.Equal(a.shards(t), []string{"s1"}) })
	want(t, a, "/readyz", 200, `ok shards=["s1"]`)
	if _, body, _ := b.get(t, "/readyz"); strings.Contains(body, "s1") {
		t.Fatalf("b's /readyz %q while a owns s1", body)
	}
	st := b.state(t)
	if sh := b.shards(t); len(sh) != 0 {
		t.Fatalf("b's /state lists %v while a owns s1: %v", sh, st)
	}
	if j, _ := json.Marshal(st["stopping"]); string(j) != `["s1"]` {
		t.Fatalf("b's /state stopping %s, want [\"s1\"] (its command has not exited): %v", j, st)
	}
	if code := a.stop(t); code != 143 {
		t.Fatalf("a exited %d: %s", code, a.errText())
	}
}

// Holds stopped (SIGSTOP) past their lease's validity say, in every answer
// after they resume, that they no longer hold the lease: about one in six
// of the first answers used to say held, made before the lease's end was
// noticed. The requests are sent while the holds are stopped, so that they
// are among the first things each does when it resumes; four holds at once
// give the race four chances.
func TestHTTPHoldStoppedPastValidity(t *testing.T) {
	dir := t.TempDir()
	var holds []*served
	for i := range 4 {
		h := serve(t, "hold", "--http", "127.0.0.1:0", "--ttl", "1s", "--holder", "alice", "file://"+dir+"/k"+strconv.Itoa(i))
		if tok := h.line(t); tok != "1" {
			t.Fatalf("token %q", tok)
		}
		want(t, h, "/readyz", 200, "ok")
		holds = append(holds, h)
	}
	for _, h := range holds {
		if err := h.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		defer h.cmd.Process.Signal(syscall.SIGCONT)
	}
	time.Sleep(2 * time.Second) // past the validity (1 s × 0.99 − 100 ms)
	type answer struct {
		path string
		code int
		body string
	}
	const each = 16
	answers := make(chan answer, each*len(holds))
	for _, h := range holds {
		for i := range each {
			path := []string{"/readyz", "/state"}[i%2]
			go func() {
				resp, err := http.Get(h.base + path)
				if err != nil {
					answers <- answer{path, 0, err.Error()} // the server closed as hold exits
					return
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				answers <- answer{path, resp.StatusCode, string(b)}
			}()
		}
	}
	time.Sleep(200 * time.Millisecond) // the requests are queued
	for _, h := range holds {
		if err := h.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	for range cap(answers) {
		a := <-answers
		if a.code == 200 && (a.path == "/readyz" || strings.Contains(a.body, `"held":true`)) {
			t.Errorf("GET %s after resuming past the validity: %d %s", a.path, a.code, a.body)
		}
	}
	for _, h := range holds {
		var ee *exec.ExitError
		if err := <-h.done; !errors.As(err, &ee) || ee.ExitCode() != exitLost {
			t.Fatalf("hold: %v, want exit %d: %s", err, exitLost, h.errText())
		}
	}
}

// A leader whose store stops answering shows its renewal in trouble in
// /state while it still leads (the request unanswered, the renewal
// overdue), and is not ready once its validity has ended. /state used to
// show no store error at all: the hung renewal reported nothing until its
// context ended, and then a request cut short, which counted as no failure.
func TestHTTPElectStalledStore(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "stall")
	t.Setenv(stallEnv, marker)
	e := serve(t, "elect", "--http", "127.0.0.1:0", "--holder", "a", "--ttl", "6s", "stall://"+filepath.Join(dir, "e"))
	if ev := e.line(t); !strings.HasPrefix(ev, "elected") {
		t.Fatalf("elect printed %q", ev)
	}
	want(t, e, "/readyz", 200, "ok")
	if st := e.state(t); st["renewal_overdue"] != false || st["renewed"] == nil || st["store_error"] != "" {
		t.Fatalf("/state of a leader renewing on time: %v", st)
	}
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The next renewal hangs; poll until the validity ends.
	var troubled map[string]any
	until(t, "the leader's validity ends", func() bool {
		st := e.state(t)
		if st["held"] != true {
			return true
		}
		if troubled == nil && st["renewal_overdue"] == true && strings.Contains(st["store_error"].(string), "no answer") {
			troubled = st
			want(t, e, "/readyz", 200, "ok") // it still leads: nobody else can
		}
		return false
	})
	if troubled == nil {
		t.Fatalf("/state never showed the renewal in trouble while the lease was held; now: %v\n%s", e.state(t), e.errText())
	}
	t.Logf("in trouble: %v", troubled)
	want(t, e, "/readyz", 503, "the lease is no longer held: lease lost")
	st := e.state(t)
	if st["held"] != false || st["ready"] != false || st["renewed"] != nil || !strings.Contains(st["store_error"].(string), "no answer") {
		t.Fatalf("/state after the validity ended: %v", st)
	}
	t.Logf("after: %v", st)
	os.Remove(marker)
	if code := e.stop(t); code != 143 {
		t.Fatalf("elect exited %d: %s", code, e.errText())
	}
	// Once the loss is told, nothing more is said about renewing the lease
	// lost: its hung renewal, cut short, used to warn after it.
	_, after, ok := strings.Cut(e.errText(), "lease lost")
	if !ok {
		t.Fatalf("no line tells the loss:\n%s", e.errText())
	}
	_, after, _ = strings.Cut(after, "\n")
	for _, l := range strings.Split(after, "\n") {
		if strings.Contains(l, "renewal") || strings.Contains(l, "outcome unknown") {
			t.Errorf("a line about the lost lease's renewal after its loss: %q\n%s", l, e.errText())
		}
	}
}
