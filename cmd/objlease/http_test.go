package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/mem"
)

// served is an objlease process started with --http 127.0.0.1:0, and the
// address it said it serves on.
type served struct {
	cmd    *exec.Cmd
	base   string // http://127.0.0.1:PORT
	stdout *bufio.Reader
	mu     sync.Mutex
	stderr bytes.Buffer
	done   chan error
}

var servingRE = regexp.MustCompile(`serving health and metrics on (http://\S+)`)

// serve starts objlease with args and waits for the line that names its
// address on stderr.
func serve(t *testing.T, args ...string) *served {
	t.Helper()
	s := &served{cmd: exec.Command(objleaseBin(t), args...), done: make(chan error, 1)}
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errPipe, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.stdout = bufio.NewReader(out)
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			s.mu.Lock()
			s.stderr.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			if m := servingRE.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		close(addr)
		s.done <- s.cmd.Wait()
	}()
	t.Cleanup(func() {
		s.cmd.Process.Kill()
	})
	a, ok := <-addr
	if !ok {
		t.Fatalf("objlease %s printed no address:\n%s", strings.Join(args, " "), s.errText())
	}
	s.base = a
	return s
}

func (s *served) errText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

// line reads one line of the process's stdout.
func (s *served) line(t *testing.T) string {
	t.Helper()
	l, err := s.stdout.ReadString('\n')
	if err != nil {
		t.Fatalf("reading stdout: %v; stderr:\n%s", err, s.errText())
	}
	return strings.TrimSpace(l)
}

// stop sends SIGTERM and returns the exit code.
func (s *served) stop(t *testing.T) int {
	t.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	go io.Copy(io.Discard, s.stdout)
	err := <-s.done
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

// get GETs path and returns the status code, body and content type.
func (s *served) get(t *testing.T, path string) (int, string, string) {
	t.Helper()
	resp, err := http.Get(s.base + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp.Header.Get("Content-Type")
}

// state GETs /state.
func (s *served) state(t *testing.T) map[string]any {
	t.Helper()
	code, body, ctype := s.get(t, "/state")
	if code != 200 || ctype != "application/json" {
		t.Fatalf("/state: %d %q %s", code, ctype, body)
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("/state is not JSON: %v: %s", err, body)
	}
	for _, k := range []string{"command", "url", "healthy", "ready", "reason", "held", "holder", "token", "expires", "renewed", "renewal_overdue", "shards", "stopping", "store_error"} {
		if _, ok := st[k]; !ok {
			t.Fatalf("/state has no %q: %s", k, body)
		}
	}
	return st
}

// until polls f, which reports whether it is done, until it is (the test's
// -timeout bounds it).
func until(t *testing.T, what string, f func() bool) {
	t.Helper()
	for !f() {
		if t.Context().Err() != nil {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func want(t *testing.T, s *served, path string, code int, body string) {
	t.Helper()
	c, b, _ := s.get(t, path)
	if c != code || !strings.Contains(b, body) {
		t.Fatalf("GET %s: %d %q, want %d and %q", path, c, b, code, body)
	}
}

// TestHTTPHold runs hold --http as a separate process and reads every
// endpoint: a holder is live and ready, a second hold waiting on the same
// lease is live but not ready, and becomes ready once it has the lease.
func TestHTTPHold(t *testing.T) {
	url := "file://" + t.TempDir() + "/k"
	first := serve(t, "hold", "--http", "127.0.0.1:0", "--ttl", "300ms", "--holder", "alice", url)
	if tok := first.line(t); tok != "1" {
		t.Fatalf("token %q", tok)
	}
	want(t, first, "/healthz", 200, "ok\n")
	want(t, first, "/readyz", 200, "ok\n")
	st := first.state(t)
	if st["command"] != "hold" || st["url"] != url || st["held"] != true || st["holder"] != "alice" || st["token"] != 1.0 || st["ready"] != true || st["expires"] == nil {
		t.Fatalf("/state %v", st)
	}
	// The library's metrics, in Prometheus' text format; renewals every
	// TTL/3 fill the histogram.
	until(t, "a renewal in /metrics", func() bool {
		_, body, _ := first.get(t, "/metrics")
		return strings.Contains(body, "objlease_lease_renew_duration_seconds_bucket{")
	})
	_, metrics, ctype := first.get(t, "/metrics")
	if !strings.HasPrefix(ctype, "text/plain") {
		t.Fatalf("/metrics content type %q", ctype)
	}
	for _, m := range []string{
		"# TYPE objlease_lease_held gauge",
		`objlease_lease_held{lease="k"`,
		`objlease_lease_token{lease="k"`,
		"# TYPE objlease_lease_acquisitions_total counter",
		"# TYPE objlease_lease_renew_duration_seconds histogram",
		"# TYPE objlease_store_requests_total counter",
		`op="create"`,
		`outcome="ok"`,
	} {
		if !strings.Contains(metrics, m) {
			t.Fatalf("/metrics has no %q:\n%s", m, metrics)
		}
	}
	if first.errText() != "objlease: serving health and metrics on "+first.base+"\n" {
		t.Fatalf("stderr %q, want the address once", first.errText())
	}

	// A second hold serves while it waits: live, not ready, and says who
	// holds the lease.
	second := serve(t, "hold", "--http", "127.0.0.1:0", "--ttl", "300ms", "--holder", "bob", "--poll", "20ms", url)
	want(t, second, "/healthz", 200, "ok\n")
	until(t, "the waiter sees alice", func() bool { return second.state(t)["holder"] == "alice" })
	want(t, second, "/readyz", 503, `the lease is held by alice (token 1)`)
	if st := second.state(t); st["held"] != false || st["ready"] != false || st["expires"] != nil {
		t.Fatalf("waiter's /state %v", st)
	}
	if code := first.stop(t); code != 0 {
		t.Fatalf("hold exited %d", code)
	}
	if _, err := http.Get(first.base + "/healthz"); err == nil {
		t.Fatal("the server still answers after hold exited")
	}
	if tok := second.line(t); tok != "2" {
		t.Fatalf("second token %q", tok)
	}
	want(t, second, "/readyz", 200, "ok\n")
	if st := second.state(t); st["holder"] != "bob" || st["token"] != 2.0 {
		t.Fatalf("/state %v", st)
	}
	if code := second.stop(t); code != 0 {
		t.Fatalf("second hold exited %d", code)
	}
}

// TestHTTPElect: the leader is ready, a follower is not and names the
// leader, and elect --listen is ready once it knows a leader.
func TestHTTPElect(t *testing.T) {
	url := "file://" + t.TempDir() + "/e"
	leader := serve(t, "elect", "--http", "127.0.0.1:0", "--holder", "a", url)
	if ev := leader.line(t); !strings.HasPrefix(ev, "elected") {
		t.Fatalf("leader printed %q", ev)
	}
	follower := serve(t, "elect", "--http", "127.0.0.1:0", "--holder", "b", "--poll", "20ms", url)
	listener := serve(t, "elect", "--listen", "--http", "127.0.0.1:0", "--poll", "20ms", url)
	want(t, leader, "/readyz", 200, "ok")
	until(t, "the follower sees the leader", func() bool { return follower.state(t)["holder"] == "a" })
	want(t, follower, "/readyz", 503, "held by a")
	want(t, follower, "/healthz", 200, "ok")
	until(t, "the listener sees the leader", func() bool { c, _, _ := listener.get(t, "/readyz"); return c == 200 })
	if st := listener.state(t); st["holder"] != "a" || st["held"] != false || st["command"] != "elect" {
		t.Fatalf("listener's /state %v", st)
	}
	if st := leader.state(t); st["held"] != true || st["holder"] != "a" {
		t.Fatalf("leader's /state %v", st)
	}
	// The leader resigns: the follower leads, the listener follows.
	if code := leader.stop(t); code != 0 {
		t.Fatalf("leader exited %d", code)
	}
	until(t, "the follower leads", func() bool { c, _, _ := follower.get(t, "/readyz"); return c == 200 })
	until(t, "the listener sees b", func() bool { return listener.state(t)["holder"] == "b" })
	for _, p := range []*served{follower, listener} {
		if code := p.stop(t); code != 0 {
			t.Fatalf("elect exited %d", code)
		}
	}
}

// TestHTTPGroupJoinAndWatch: a member is ready once joined and lists its
// shards; watch is ready once it has read the store.
func TestHTTPGroupJoinAndWatch(t *testing.T) {
	dir := t.TempDir()
	url := "file://" + dir + "/g/"
	if out, err := exec.Command(objleaseBin(t), "group", "define", url, "s1", "s2").CombinedOutput(); err != nil {
		t.Fatalf("define: %v: %s", err, out)
	}
	w := serve(t, "group", "join", "--http", "127.0.0.1:0", "--member", "m1", "--ttl", "2s", url, "--", "sleep", "3600")
	until(t, "the member owns both shards", func() bool {
		sh, _ := w.state(t)["shards"].([]any)
		return len(sh) == 2
	})
	want(t, w, "/readyz", 200, `ok shards=["s1","s2"]`)
	if st := w.state(t); st["command"] != "group join" || st["holder"] != "m1" || !slices.Equal(st["shards"].([]any), []any{"s1", "s2"}) {
		t.Fatalf("/state %v", st)
	}
	watch := serve(t, "watch", "--http", "127.0.0.1:0", "--poll", "20ms", url)
	until(t, "watch has read", func() bool { c, _, _ := watch.get(t, "/readyz"); return c == 200 })
	want(t, watch, "/healthz", 200, "ok")
	if st := watch.state(t); st["command"] != "watch" || st["ready"] != true {
		t.Fatalf("watch's /state %v", st)
	}
	if code := watch.stop(t); code != 0 {
		t.Fatalf("watch exited %d: %s", code, watch.errText())
	}
	// A member leaves the group on SIGTERM, and exits 128+15 as documented.
	if code := w.stop(t); code != 143 {
		t.Fatalf("group join exited %d: %s", code, w.errText())
	}
}

// TestHTTPAddressInUse: an --http address that cannot be listened on is a
// usage error, said in one line, before the lease is taken.
func TestHTTPAddressInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	url := "file://" + t.TempDir() + "/k"
	cmd := exec.Command(objleaseBin(t), "hold", "--http", ln.Addr().String(), url)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitUsage {
		t.Fatalf("hold: %v, want exit %d; stderr %s", err, exitUsage, stderr.String())
	}
	wantErr := "objlease: --http " + ln.Addr().String() + ": cannot listen there: address already in use\n"
	if stderr.String() != wantErr {
		t.Fatalf("stderr %q, want %q", stderr.String(), wantErr)
	}
	if out, err := exec.Command(objleaseBin(t), "inspect", url).CombinedOutput(); err == nil {
		t.Fatalf("the lease was taken: %s", out)
	}
}

// TestLogFormatJSONLine: a log record with --log-format json is one object
// with the stable keys, its error attribute a string under "err".
func TestLogFormatJSONLine(t *testing.T) {
	var buf bytes.Buffer
	on, verbose, cmd := true, false, "watch"
	var level slog.LevelVar
	log := slog.New(&lineHandler{w: &buf, level: &level, verbose: &verbose, json: &on, cmd: &cmd, mu: new(sync.Mutex)})
	log.With(slog.String("shard", "s1")).Warn("cannot read the store", slog.Any("err", errors.New("boom")), slog.Int("n", 3))
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil || !bytes.HasSuffix(buf.Bytes(), []byte("}\n")) || bytes.Count(buf.Bytes(), []byte("\n")) != 1 {
		t.Fatalf("not one JSON line: %v: %q", err, buf.String())
	}
	if _, err := time.Parse(time.RFC3339Nano, got["time"].(string)); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]any{"level": "WARN", "msg": "cannot read the store", "cmd": "watch", "err": "boom", "n": 3.0, "shard": "s1"} {
		if got[k] != v {
			t.Fatalf("%s = %v, want %v in %s", k, got[k], v, buf.String())
		}
	}
	if !strings.HasPrefix(buf.String(), `{"time":`) || !strings.Contains(buf.String(), `"level":"WARN","msg":"cannot read the store","cmd":"watch"`) {
		t.Fatalf("keys out of order: %s", buf.String())
	}
}

// TestHealthzFailsOnlyOnPermanentStoreErrors: /healthz fails on a store
// error waiting cannot cure, and while shutting down; not on an
// unreachable store, which the command rides out.
func TestHealthzFailsOnlyOnPermanentStoreErrors(t *testing.T) {
	p := &probe{command: "watch", url: "s3://b/k", ready: func(p *probe) (bool, string) { return p.polled, "the last read of the store failed" }}
	h := p.handler(prometheus.NewRegistry())
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code, rec.Body.String()
	}
	for _, tc := range []struct {
		err  error
		code int
		body string
	}{
		{nil, 200, "ok\n"},
		{fmt.Errorf("get k: %w", providers.ErrUnreachable), 200, "ok\n"},
		{fmt.Errorf("get k: %w", providers.ErrNotFound), 200, "ok\n"},
		{fmt.Errorf("get k: %w", providers.ErrPermission), 503, "store: "},
		{fmt.Errorf("get k: %w", providers.ErrNoBucket), 503, "store: "},
	} {
		p.stored(tc.err)
		if code, body := get("/healthz"); code != tc.code || !strings.HasPrefix(body, tc.body) {
			t.Errorf("%v: /healthz %d %q, want %d %q", tc.err, code, body, tc.code, tc.body)
		}
	}
	p.stored(nil)
	if code, body := get("/readyz"); code != 503 || body != "the last read of the store failed\n" {
		t.Errorf("/readyz %d %q", code, body)
	}
	p.set(func(p *probe) { p.polled = true })
	if code, _ := get("/readyz"); code != 200 {
		t.Errorf("/readyz %d after a read", code)
	}
	// A request in flight for a second is shown; one this process cut
	// short says nothing of the store, unless it had gone unanswered for
	// that long.
	slow := p.begin("replace", "k")
	slow.start = slow.start.Add(-2 * time.Second)
	if st := p.snapshot(); !strings.HasPrefix(st.StoreError, `replace "k": no answer from the store for 2s`) || !st.Healthy {
		t.Errorf("a request unanswered for 2 s: %+v", st)
	}
	p.end(p.begin("get", "k"), context.Canceled)
	if st := p.snapshot(); !strings.Contains(st.StoreError, "no answer") {
		t.Errorf("a request cut short cleared the slow one: %+v", st)
	}
	p.end(slow, fmt.Errorf("replace k: %w", context.Canceled))
	if st := p.snapshot(); !strings.HasPrefix(st.StoreError, `replace "k": no answer from the store in 2s; the request was given up`) || !st.Healthy {
		t.Errorf("a request given up after 2 s: %+v", st)
	}
	p.end(p.begin("get", "k"), nil)
	if st := p.snapshot(); st.StoreError != "" {
		t.Errorf("an answer did not clear the store error: %+v", st)
	}
	p.set(func(p *probe) { p.stopping = true })
	if code, body := get("/healthz"); code != 503 || body != "shutting down\n" {
		t.Errorf("/healthz %d %q while stopping", code, body)
	}
	if code, _ := get("/readyz"); code != 503 {
		t.Errorf("/readyz %d while stopping", code)
	}
}

// resumedClock is a fake clock whose reading can jump ahead without firing
// any timer, as a process resumed after SIGSTOP past its lease's validity
// reads the time before its timers have run.
type resumedClock struct {
	*clock.Fake
	ahead atomic.Int64
}

func (c *resumedClock) Now() time.Time { return c.Fake.Now().Add(time.Duration(c.ahead.Load())) }

// The probes judge the lease by its validity at the moment they answer,
// not by whether its end has been noticed yet: the first answers after a
// process was paused past its validity said held, before the lease's
// watcher woke to end it.
func TestProbeHeldEndsWithValidity(t *testing.T) {
	ctx := context.Background()
	clk := &resumedClock{Fake: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	cl, err := newOn(mem.New(), "k", objlease.SessionOptions{Clock: clk}, objlease.Options{TTL: 10 * time.Second, Holder: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := cl.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	p := &probe{command: "hold", url: "mem://k"}
	p.set(func(p *probe) { p.lease = l })
	h := p.handler(prometheus.NewRegistry())
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := get("/readyz"); code != 200 {
		t.Fatalf("/readyz %d %q while held", code, body)
	}
	clk.ahead.Store(int64(time.Minute)) // paused for a minute; no timer has run
	if l.Err() != nil {
		t.Fatalf("the lease ended before the probe was asked: %v", l.Err())
	}
	if code, body := get("/readyz"); code != 503 || body != "the lease is not held\n" {
		t.Fatalf("/readyz %d %q past the lease's validity, want 503", code, body)
	}
	_, body := get("/state")
	var st state
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	if st.Held || st.Ready || st.Expires != nil {
		t.Fatalf("/state past the lease's validity: %s", body)
	}
	if !errors.Is(l.Err(), objlease.ErrLeaseLost) {
		t.Fatalf("asking ended nothing: %v", l.Err())
	}
}
