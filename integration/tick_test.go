package integration

// Once per tick (package tick, run --once-per and --tick) on every store
// of the matrix: a local directory, versitygw (S3), MinIO, fake-gcs-server
// and Azurite, through the library and through the command alike. Each
// case is one a scheduler's user meets: a tick redelivered after later
// ones, periods that start together, ids that cannot be remembered, a
// lease record or a mark deleted by hand, another lease where the mark
// belongs, and (through the library, with a store whose clock is set) a
// trigger at a period's boundary.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/fence"
	"github.com/objlease/objlease/objlease/tick"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/file"
	"github.com/objlease/objlease/providers/gcsstore"
)

// tickStore is one store of the matrix: the library's store, a prefix of
// the test's own, and how the command reaches a key (url nil: on a real
// bucket, where the command's environment is the machine's own).
type tickStore struct {
	store  providers.Store
	prefix string
	url    func(key string) string
	env    []string
}

var tickMatrix = []struct {
	name string
	open func(t *testing.T) tickStore
}{
	{"file", func(t *testing.T) tickStore {
		dir := t.TempDir()
		st, err := file.New(dir)
		if err != nil {
			t.Fatal(err)
		}
		return tickStore{store: st, url: func(key string) string { return "file://" + filepath.Join(dir, key) }}
	}},
	{"s3", func(t *testing.T) tickStore {
		target := newS3Target(t)
		ts := tickStore{store: target.store(t, nil), prefix: target.prefix}
		target.cleanup(t, ts.store)
		if !target.real() {
			e := target.emu
			ts.url = func(key string) string { return s3CLIURL(e.Endpoint, e.Bucket, key) }
			ts.env = s3CLIEnv(e, e.AccessKey, e.SecretKey)
		}
		return ts
	}},
	{"minio", func(t *testing.T) tickStore {
		target := minioTarget(t)
		e := target.emu
		ts := tickStore{store: target.store(t, nil), prefix: target.prefix,
			url: func(key string) string { return s3CLIURL(e.Endpoint, e.Bucket, key) },
			env: s3CLIEnv(e, e.AccessKey, e.SecretKey)}
		target.cleanup(t, ts.store)
		return ts
	}},
	{"gcs", func(t *testing.T) tickStore {
		g := newGCSTarget(t)
		ts := tickStore{store: gcsstore.New(g.client(t, nil), g.bucket), prefix: g.prefix}
		if !g.real() {
			ts.url = func(key string) string { return "gs://" + g.bucket + "/" + key }
			ts.env = []string{"STORAGE_EMULATOR_HOST=" + g.host}
		}
		return ts
	}},
	{"azure", func(t *testing.T) tickStore {
		a := newAzTarget(t)
		ts := tickStore{store: a.store(t, nil), prefix: a.prefix}
		if !a.real() {
			ts.url = func(key string) string { return "azblob://" + a.container + "/" + key }
			ts.env = []string{"AZURE_STORAGE_CONNECTION_STRING=" + a.connStr}
		}
		return ts
	}},
}

func TestTickOnEveryStore(t *testing.T) {
	for _, m := range tickMatrix {
		t.Run(m.name, func(t *testing.T) {
			ts := m.open(t)
			t.Run("library", func(t *testing.T) { tickLibrary(t, ts) })
			t.Run("command", func(t *testing.T) {
				if ts.url == nil {
					t.Skip("a real bucket: the command's credentials are the machine's own")
				}
				tickCommand(t, ts)
			})
		})
	}
}

// libTrigger is one trigger through the library: a client of its own
// whose tokens stay above the mark's, and its lease.
func libTrigger(t *testing.T, store providers.Store, key, holder string) *objlease.Lease {
	t.Helper()
	ctx := t.Context()
	floor, err := tick.Floor(ctx, store, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := objlease.New(store, key, objlease.Options{TTL: 30 * time.Second, Holder: holder, MinToken: &floor})
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("%s: acquire: %v", holder, err)
	}
	return l
}

// onceBy runs one trigger of id through the library and reports whether
// the job ran, and under which token.
func onceBy(t *testing.T, store providers.Store, key, holder, id string) (bool, uint64) {
	t.Helper()
	l := libTrigger(t, store, key, holder)
	defer l.Release(context.WithoutCancel(t.Context()))
	ran, _, err := tick.Once(t.Context(), store, l, id, func(context.Context) error { return nil })
	if err != nil {
		t.Fatalf("%s: tick %.40q: %v", holder, id, err)
	}
	return ran, l.Token()
}

// skewedStore is a store whose clock (the Last-Modified it reports) is
// shifted: a store whose clock disagrees with the scheduler's.
type skewedStore struct {
	providers.Store
	shift time.Duration
}

func (s skewedStore) Stat(ctx context.Context, key string) (*providers.Attrs, error) {
	a, err := s.Store.Stat(ctx, key)
	if a != nil {
		b := *a
		b.LastModified = b.LastModified.Add(s.shift)
		a = &b
	}
	return a, err
}

func tickLibrary(t *testing.T, ts tickStore) {
	ctx := t.Context()
	st := ts.store

	t.Run("redelivered", func(t *testing.T) {
		key := ts.prefix + "lib/redelivered"
		for i, c := range []struct {
			id  string
			ran bool
		}{{"build-41", true}, {"build-42", true}, {"build-41", false}, {"build-42", false}} {
			if ran, _ := onceBy(t, st, key, fmt.Sprint("h", i), c.id); ran != c.ran {
				t.Errorf("trigger %d of %s: ran %v, want %v", i, c.id, ran, c.ran)
			}
		}
	})

	t.Run("periods", func(t *testing.T) {
		key := ts.prefix + "lib/periods"
		l := libTrigger(t, st, key, "a")
		at, err := tick.Now(ctx, st, l)
		l.Release(ctx)
		if err != nil {
			t.Fatal(err)
		}
		hour, day := tick.Of(at, time.Hour), tick.Of(at, 24*time.Hour)
		for i, c := range []struct {
			id  string
			ran bool
		}{{hour, true}, {day, true}, {hour, false}, {day, false}} {
			if ran, _ := onceBy(t, st, key, fmt.Sprint("h", i), c.id); ran != c.ran {
				t.Errorf("trigger %d of %s: ran %v, want %v", i, c.id, ran, c.ran)
			}
		}
	})

	t.Run("ids", func(t *testing.T) {
		key := ts.prefix + "lib/ids"
		for _, id := range []string{strings.Repeat("x", tick.MaxIDBytes+1), "build-\xff", "build-1\nforged"} {
			l := libTrigger(t, st, key, "a")
			ran, _, err := tick.Once(ctx, st, l, id, func(context.Context) error { return nil })
			l.Release(ctx)
			if ran || !errors.Is(err, tick.ErrBadTick) {
				t.Errorf("id %.40q: ran %v, %v; want ErrBadTick without running", id, ran, err)
			}
		}
		// The longest ids, of characters the mark doubles, are written
		// and read back.
		long := func(i int) string { return fmt.Sprint(i) + strings.Repeat(`"\`, (tick.MaxIDBytes-2)/2) }
		for i := range 3 {
			if ran, _ := onceBy(t, st, key, fmt.Sprint("h", i), long(i)); !ran {
				t.Errorf("long id %d did not run", i)
			}
		}
		if ran, _ := onceBy(t, st, key, "again", long(0)); ran {
			t.Errorf("long id 0 ran again")
		}
	})

	t.Run("floor", func(t *testing.T) {
		key := ts.prefix + "lib/floor"
		for i, id := range []string{"a", "b", "c"} {
			onceBy(t, st, key, fmt.Sprint("h", i), id)
		}
		a, err := st.Stat(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Delete(ctx, key, a.Version); err != nil {
			t.Fatal(err)
		}
		for i, want := range []struct {
			ran   bool
			token uint64
		}{{true, 4}, {false, 5}, {false, 6}} {
			if ran, token := onceBy(t, st, key, fmt.Sprint("d", i), "d"); ran != want.ran || token != want.token {
				t.Errorf("trigger %d of d after the record was deleted: ran %v under token %d, want %v under %d", i, ran, token, want.ran, want.token)
			}
		}
		if err := fence.Delete(ctx, st, tick.Key(key), 9, fence.Options{UniquePayloads: true}); err != nil {
			t.Fatal(err)
		}
		for i, want := range []struct {
			ran   bool
			token uint64
		}{{true, 10}, {false, 11}} {
			if ran, token := onceBy(t, st, key, fmt.Sprint("e", i), "e"); ran != want.ran || token != want.token {
				t.Errorf("trigger %d of e after the mark's fenced delete: ran %v under token %d, want %v under %d", i, ran, token, want.ran, want.token)
			}
		}
	})

	t.Run("boundary", func(t *testing.T) {
		midnight := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
		// trigger runs one trigger of the daily schedule at key on the
		// store with its clock set to at.
		trigger := func(key, holder string, at time.Time) (bool, string) {
			t.Helper()
			sk := skewedStore{st, time.Until(at)}
			l := libTrigger(t, sk, key, holder)
			defer l.Release(ctx)
			now, err := tick.Now(ctx, sk, l)
			if err != nil {
				t.Fatal(err)
			}
			id := tick.Of(now, 24*time.Hour)
			ran, _, err := tick.Once(ctx, sk, l, id, func(context.Context) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			return ran, id
		}
		// Stores stamp whole seconds: a clock set to T reads T - 1 s to T.
		for _, c := range []struct {
			name string
			skew time.Duration // the store's clock minus the scheduler's, at its midnight
			ran  bool
			tick string
		}{
			{"store ahead", 2 * time.Second, true, "2026-12-05T00:00:00Z/PT24H"},
			{"store behind", -2 * time.Second, true, "2026-12-05T00:00:00Z/PT24H"},
			{"store behind past Early", -32 * time.Second, false, "2026-12-04T00:00:00Z/PT24H"},
		} {
			t.Run(c.name, func(t *testing.T) {
				key := ts.prefix + "lib/boundary/" + strings.ReplaceAll(c.name, " ", "-")
				if ran, id := trigger(key, "yesterday", midnight.Add(-24*time.Hour+2*time.Second)); !ran || id != "2026-12-04T00:00:00Z/PT24H" {
					t.Fatalf("yesterday's trigger: ran %v for %s", ran, id)
				}
				if ran, id := trigger(key, "today", midnight.Add(c.skew)); ran != c.ran || id != c.tick {
					t.Errorf("today's trigger at the scheduler's midnight: ran %v for %s; want ran %v for %s", ran, id, c.ran, c.tick)
				}
			})
		}
		t.Run("started twice across midnight", func(t *testing.T) {
			key := ts.prefix + "lib/boundary/twice"
			ran1, id1 := trigger(key, "first", midnight.Add(-400*time.Millisecond))
			ran2, id2 := trigger(key, "second", midnight.Add(time.Second))
			if !ran1 || ran2 || id1 != id2 {
				t.Errorf("first start ran %v for %s, second ran %v for %s; want one run, for 2026-12-05", ran1, id1, ran2, id2)
			}
		})
	})

	t.Run("lease at the mark's key", func(t *testing.T) {
		key := ts.prefix + "lib/job"
		other, err := objlease.New(st, tick.Key(key), objlease.Options{TTL: 30 * time.Second, Holder: "other-job"})
		if err != nil {
			t.Fatal(err)
		}
		ol, err := other.TryAcquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		l := libTrigger(t, st, key, "a")
		ran, _, err := tick.Once(ctx, st, l, "a", func(context.Context) error { return nil })
		l.Release(ctx)
		if ran || !errors.Is(err, tick.ErrBadMark) || strings.Contains(err.Error(), "remove") {
			t.Errorf("a lease at the mark's key: ran %v, %v; want ErrBadMark naming the lease, without advice to remove it", ran, err)
		}
		if err := ol.Release(ctx); err != nil {
			t.Errorf("the other lease was disturbed: %v", err)
		}
	})
}

// tickRun runs the command with env added to a clean environment, and
// returns its exit code, stdout and stderr.
func tickRun(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, objleaseBin(t), args...)
	home := t.TempDir()
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home,
		"AWS_CONFIG_FILE=" + filepath.Join(home, "aws-config"),
		"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(home, "aws-credentials"),
		"AWS_EC2_METADATA_DISABLED=true",
	}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("objlease %s did not end within %v; stderr so far:\n%s", strings.Join(args, " "), commandBound, stderr.String())
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), stdout.String(), stderr.String()
	case err != nil:
		t.Fatalf("objlease %s: %v", strings.Join(args, " "), err)
	}
	return 0, stdout.String(), stderr.String()
}

func tickCommand(t *testing.T, ts tickStore) {
	// run runs one trigger; it returns the exit code, the token the
	// command ran under and its tick ("" if it did not run) and stderr.
	run := func(t *testing.T, key string, flags ...string) (int, string, string) {
		t.Helper()
		args := append(append([]string{"run"}, flags...), ts.url(key), "--", "sh", "-c", `echo $OBJLEASE_TOKEN "$OBJLEASE_TICK"`)
		code, out, errOut := tickRun(t, ts.env, args...)
		return code, strings.TrimSpace(out), errOut
	}
	want := func(t *testing.T, what string, code int, out, errOut, ran string) {
		t.Helper()
		if code != 0 || out != ran || (ran == "" && !strings.Contains(errOut, "was done by token")) {
			t.Errorf("%s: exit %d, the command printed %q; want exit 0 and %q; stderr:\n%s", what, code, out, ran, errOut)
		}
	}

	t.Run("redelivered", func(t *testing.T) {
		key := ts.prefix + "cli/redelivered"
		for i, c := range []struct{ id, ran string }{{"build-41", "1 build-41"}, {"build-42", "2 build-42"}, {"build-41", ""}, {"build-42", ""}} {
			code, out, errOut := run(t, key, "--tick", c.id)
			want(t, fmt.Sprintf("trigger %d of %s", i, c.id), code, out, errOut, c.ran)
		}
	})

	t.Run("periods", func(t *testing.T) {
		// A day's tick and a week's start together only at a Thursday's
		// midnight; keep clear of any midnight, as a day's tick does.
		if now := time.Now().UTC(); now.Add(2*time.Minute).Day() != now.Day() {
			time.Sleep(time.Until(now.Add(2 * time.Minute).Truncate(24 * time.Hour)))
		}
		key := ts.prefix + "cli/periods"
		day := tick.Of(time.Now(), 24*time.Hour)
		week := tick.Of(time.Now(), 168*time.Hour)
		for i, c := range []struct{ period, ran string }{{"24h", "1 " + day}, {"168h", "2 " + week}, {"24h", ""}, {"168h", ""}} {
			code, out, errOut := run(t, key, "--once-per", c.period)
			want(t, fmt.Sprintf("trigger %d, --once-per %s", i, c.period), code, out, errOut, c.ran)
		}
	})

	t.Run("ids", func(t *testing.T) {
		key := ts.prefix + "cli/ids"
		for _, id := range []string{strings.Repeat("x", 5000), "build-\xff", "build-1\nobjlease: forged"} {
			code, out, errOut := run(t, key, "--tick", id)
			if code != 64 || out != "" || strings.Count(errOut, "\n") != 1 {
				t.Errorf("--tick %.40q: exit %d, stdout %q, stderr %.200q; want 64 and one line", id, code, out, errOut)
			}
		}
		if _, err := ts.store.Stat(t.Context(), key); !errors.Is(err, providers.ErrNotFound) {
			t.Errorf("a lease was taken for an id refused: %v", err)
		}
		code, out, errOut := run(t, key, "--tick", "build-1")
		want(t, "a good id after them", code, out, errOut, "1 build-1")
		code, out, errOut = run(t, key, "--tick", "build-1")
		want(t, "the good id again", code, out, errOut, "")
	})

	t.Run("floor", func(t *testing.T) {
		key := ts.prefix + "cli/floor"
		for i, id := range []string{"a", "b", "c"} {
			code, out, errOut := run(t, key, "--tick", id)
			want(t, "tick "+id, code, out, errOut, fmt.Sprint(i+1, " ", id))
		}
		a, err := ts.store.Stat(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		if err := ts.store.Delete(t.Context(), key, a.Version); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := run(t, key, "--tick", "d")
		want(t, "tick d after the lease record was deleted", code, out, errOut, "4 d")
		if !regexp.MustCompile(`warning: .*record is gone, below token 3`).MatchString(errOut) {
			t.Errorf("no warning that the record was deleted:\n%s", errOut)
		}
		for range 2 {
			code, out, errOut = run(t, key, "--tick", "d")
			want(t, "tick d again", code, out, errOut, "")
		}
		if code, _, errOut := tickRun(t, ts.env, "rm", "--token", "9", "--unique-payloads", ts.url(key+".tick")); code != 0 {
			t.Fatalf("rm --token 9 of the mark: exit %d: %s", code, errOut)
		}
		code, out, errOut = run(t, key, "--tick", "e")
		want(t, "tick e after the mark was deleted with token 9", code, out, errOut, "10 e")
		code, out, errOut = run(t, key, "--tick", "e")
		want(t, "tick e again", code, out, errOut, "")
	})

	t.Run("lease at the mark's key", func(t *testing.T) {
		key := ts.prefix + "cli/job"
		if code, _, errOut := tickRun(t, ts.env, "acquire", "--holder", "other-job", ts.url(key+".tick")); code != 0 {
			t.Fatalf("acquire job.tick: exit %d: %s", code, errOut)
		}
		code, out, errOut := run(t, key, "--tick", "a")
		if code != 65 || out != "" || strings.Contains(errOut, "remove") || !strings.Contains(errOut, "record of another lease") {
			t.Errorf("run beside a lease at job.tick: exit %d, stdout %q, stderr %q; want 65 naming the lease, without advice to remove it", code, out, errOut)
		}
	})
}
