//go:build unix

package main

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/file"
)

// clockfile:///DIR/KEY?now=T is a file store whose clock (the
// Last-Modified it stamps) reads T when the store is opened and runs on
// from there: a store whose clock disagrees with the scheduler's. It is
// registered only in the objlease processes these tests start
// (OBJLEASE_TEST_CLOCKFILE=1): completion lists the registered schemes.
func init() {
	if os.Getenv("OBJLEASE_TEST_CLOCKFILE") == "" {
		return
	}
	_ = providers.Register("clockfile", func(_ context.Context, u *url.URL, _ providers.OpenOptions) (*providers.Bucket, string, error) {
		start, err := time.Parse(time.RFC3339Nano, u.Query().Get("now"))
		if err != nil {
			return nil, "", err
		}
		opened := time.Now()
		root, key := path.Split(u.Path)
		b, err := file.New(root, file.WithClock(func() time.Time { return start.Add(time.Since(opened)) }))
		return b, key, err
	})
}

// clockURL is the clockfile URL of key in dir, whose store's clock reads
// now.
func clockURL(dir, key string, now time.Time) string {
	return "clockfile://" + filepath.Join(dir, key) + "?now=" + url.QueryEscape(now.Format(time.RFC3339Nano))
}

// tickCLI runs the real binary and returns its exit code, stdout and
// stderr.
func tickCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(objleaseBin(t), args...)
	cmd.Env = append(os.Environ(), "OBJLEASE_TEST_CLOCKFILE=1")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("objlease %s: %v", strings.Join(args, " "), err)
	}
	return code, stdout.String(), stderr.String()
}

// trigger is one trigger of a scheduled run: "objlease run FLAGS URL --
// sh -c 'echo ran $OBJLEASE_TOKEN $OBJLEASE_TICK'". It returns the exit
// code, what the command printed ("" if it did not run) and stderr.
func trigger(t *testing.T, u string, flags ...string) (int, string, string) {
	t.Helper()
	args := append(append([]string{"run"}, flags...), u, "--", "sh", "-c", `echo ran $OBJLEASE_TOKEN "$OBJLEASE_TICK"`)
	return tickCLI(t, args...)
}

// wantRan fails t unless a trigger exited 0 after running the command
// under token (0: any) for the tick matching tickRe ("" : any).
func wantRan(t *testing.T, what string, code int, out, stderr string, token, tickRe string) {
	t.Helper()
	re := regexp.MustCompile(`^ran ` + token + ` ` + tickRe + `\n$`)
	if code != 0 || !re.MatchString(out) {
		t.Fatalf("%s: exit %d, stdout %q; want exit 0 and a line matching %q; stderr:\n%s", what, code, out, re, stderr)
	}
}

// wantSkipped fails t unless a trigger exited 0 without running the
// command, saying the tick was done.
func wantSkipped(t *testing.T, what string, code int, out, stderr string) {
	t.Helper()
	if code != 0 || out != "" || !strings.Contains(stderr, "was done by token") {
		t.Fatalf("%s: exit %d, stdout %q, stderr %q; want exit 0, the command not run, and the tick said done", what, code, out, stderr)
	}
}

// A tick redelivered after a later one (Pub/Sub redelivers out of order)
// finds itself done: every tick done is remembered, not only the last.
func TestTickRedeliveredAfterALaterOneIsDone(t *testing.T) {
	u := "file://" + filepath.Join(t.TempDir(), "job")
	code, out, errOut := trigger(t, u, "--tick", "build-41")
	wantRan(t, "build-41", code, out, errOut, "1", "build-41")
	code, out, errOut = trigger(t, u, "--tick", "build-42")
	wantRan(t, "build-42", code, out, errOut, "2", "build-42")
	code, out, errOut = trigger(t, u, "--tick", "build-41")
	wantSkipped(t, "build-41 redelivered after build-42", code, out, errOut)
	code, out, errOut = trigger(t, u, "--tick", "build-42")
	wantSkipped(t, "build-42 redelivered", code, out, errOut)
}

// The period is part of the tick: a key whose --once-per changes, or two
// schedules of different periods sharing a key, do not find each other's
// ticks done where their periods start together.
func TestTickPeriodIsPartOfTheTick(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2026, 12, 4, 0, 0, 10, 0, time.UTC) // a minute, a 2-minute period, an hour and a day start at 00:00
	code, out, errOut := trigger(t, clockURL(dir, "job", at), "--once-per", "1m")
	wantRan(t, "--once-per 1m", code, out, errOut, "1", `2026-12-04T00:00:00Z/PT1M`)
	code, out, errOut = trigger(t, clockURL(dir, "job", at.Add(time.Second)), "--once-per", "2m")
	wantRan(t, "--once-per 2m after 1m", code, out, errOut, "2", `2026-12-04T00:00:00Z/PT2M`)
	code, out, errOut = trigger(t, clockURL(dir, "job", at.Add(2*time.Second)), "--once-per", "1h")
	wantRan(t, "--once-per 1h", code, out, errOut, "3", `2026-12-04T00:00:00Z/PT1H`)
	code, out, errOut = trigger(t, clockURL(dir, "job", at.Add(3*time.Second)), "--once-per", "24h")
	wantRan(t, "--once-per 24h after 1h", code, out, errOut, "4", `2026-12-04T00:00:00Z/PT24H`)
	code, out, errOut = trigger(t, clockURL(dir, "job", at.Add(4*time.Second)), "--once-per", "1h")
	wantSkipped(t, "--once-per 1h again", code, out, errOut)
}

// Periods are aligned to the Unix epoch, as the help says: weeks start on
// Thursday (1970-01-01 was one), 5-hour periods at 00:00, 05:00, ... of
// 1970-01-01.
func TestTickPeriodsAlignToTheEpoch(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := trigger(t, clockURL(dir, "weekly", time.Date(2026, 12, 9, 12, 0, 0, 0, time.UTC)), "--once-per", "168h")
	wantRan(t, "--once-per 168h", code, out, errOut, "1", `2026-12-03T00:00:00Z/PT168H`) // a Thursday
	code, out, errOut = trigger(t, clockURL(dir, "5h", time.Date(2026, 12, 4, 3, 30, 0, 0, time.UTC)), "--once-per", "5h")
	wantRan(t, "--once-per 5h", code, out, errOut, "1", `2026-12-04T01:00:00Z/PT5H`)
}

// Ids are checked before the lease is taken: one too long to remember,
// one not UTF-8, one with a newline (a forged log line) exit 64 and write
// nothing; a lease key whose mark's key the store refuses exits 64
// before acquiring. The key then works as before.
func TestTickIDsAreCheckedBeforeAcquiring(t *testing.T) {
	dir := t.TempDir()
	u := "file://" + filepath.Join(dir, "job")
	for _, id := range []string{strings.Repeat("x", 5000), "build-\xff", "build-1\nobjlease: forged"} {
		code, out, errOut := trigger(t, u, "--tick", id)
		if code != exitUsage || out != "" {
			t.Errorf("--tick %.40q: exit %d, stdout %.60q; want 64 and the command not run; stderr:\n%.300s", id, code, out, errOut)
		}
		if strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "--tick") {
			t.Errorf("--tick %.40q: stderr %.300q; want one line about --tick", id, errOut)
		}
		if _, err := os.Stat(filepath.Join(dir, "job")); err == nil {
			t.Fatalf("--tick %.40q: the lease was taken for a tick refused", id)
		}
	}
	code, out, errOut := trigger(t, u, "--tick", "build-1")
	wantRan(t, "a good id after the refused ones", code, out, errOut, "1", "build-1")
	code, out, errOut = trigger(t, u, "--tick", "build-2")
	wantRan(t, "the next id", code, out, errOut, "2", "build-2")

	long := "file://" + filepath.Join(dir, strings.Repeat("k", 252))
	code, out, errOut = trigger(t, long, "--tick", "build-1")
	if code != exitUsage || out != "" || !strings.Contains(errOut, ".tick") {
		t.Errorf("a lease key whose mark's key is too long: exit %d, stdout %q, stderr %q; want 64 naming the mark's key", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, strings.Repeat("k", 252))); err == nil {
		t.Errorf("the lease was taken though its tick could never be marked")
	}
}

// A lease record removed by hand (rm of the lease file) or a mark deleted
// with a higher token (rm --token 5 KEY.tick) does not make every trigger
// run: the mark's token is a floor for the lease's next token, and the
// first trigger says the record was recreated below it.
func TestTickMarkIsAFloorForTheToken(t *testing.T) {
	dir := t.TempDir()
	u := "file://" + filepath.Join(dir, "job")
	for i, id := range []string{"a", "b", "c"} {
		code, out, errOut := trigger(t, u, "--tick", id)
		wantRan(t, "tick "+id, code, out, errOut, string(rune('1'+i)), id)
	}
	if err := os.Remove(filepath.Join(dir, "job")); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := trigger(t, u, "--tick", "d")
	wantRan(t, "tick d after the lease file was removed", code, out, errOut, "4", "d")
	if !strings.Contains(errOut, "warning:") || !strings.Contains(errOut, "below") {
		t.Errorf("no warning that the lease record was recreated below the mark's token:\n%s", errOut)
	}
	for range 2 {
		code, out, errOut = trigger(t, u, "--tick", "d")
		wantSkipped(t, "tick d again", code, out, errOut)
	}

	if code, _, errOut := tickCLI(t, "rm", "--token", "9", u+".tick"); code != 0 {
		t.Fatalf("rm --token 9 of the mark: exit %d: %s", code, errOut)
	}
	code, out, errOut = trigger(t, u, "--tick", "e")
	wantRan(t, "tick e after the mark was deleted with token 9", code, out, errOut, "10", "e")
	code, out, errOut = trigger(t, u, "--tick", "e")
	wantSkipped(t, "tick e again", code, out, errOut)
}

// A trigger is judged on the store's clock at its acquisition; one that
// lands a little before a period's start by the store's clock (the
// scheduler's clock ahead of the store's, the scheduler firing at the
// boundary) counts for that period, not for the one before, whichever
// way the clocks disagree.
func TestTickAtTheBoundaryWithSkewedStoreClocks(t *testing.T) {
	midnight := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		skew time.Duration // the store's clock minus the scheduler's
	}{
		{"store behind", -2 * time.Second},
		{"store ahead", 2 * time.Second},
		{"store just behind", -100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			// Yesterday's run was done.
			code, out, errOut := trigger(t, clockURL(dir, "nightly", midnight.Add(-24*time.Hour+time.Second)), "--once-per", "24h")
			wantRan(t, "yesterday", code, out, errOut, "1", `2026-12-04T00:00:00Z/PT24H`)
			// Today's trigger, fired at the scheduler's midnight.
			code, out, errOut = trigger(t, clockURL(dir, "nightly", midnight.Add(tc.skew)), "--once-per", "24h")
			wantRan(t, "today's trigger at the boundary", code, out, errOut, "2", `2026-12-05T00:00:00Z/PT24H`)
		})
	}
	// One trigger started twice, straddling the boundary by the store's
	// clock: the job runs once.
	dir := t.TempDir()
	code, out, errOut := trigger(t, clockURL(dir, "nightly", midnight.Add(-400*time.Millisecond)), "--once-per", "24h")
	wantRan(t, "the first start, before midnight", code, out, errOut, "1", `2026-12-05T00:00:00Z/PT24H`)
	code, out, errOut = trigger(t, clockURL(dir, "nightly", midnight.Add(400*time.Millisecond)), "--once-per", "24h")
	wantSkipped(t, "the second start, after midnight", code, out, errOut)
}

// Another job's lease named KEY.tick, where this job's mark belongs, is
// left alone, and the message does not advise deleting it.
func TestTickMarkKeyHeldByAnotherLease(t *testing.T) {
	dir := t.TempDir()
	u := "file://" + filepath.Join(dir, "job")
	if code, _, errOut := tickCLI(t, "acquire", "--holder", "other-job", u+".tick"); code != 0 {
		t.Fatalf("acquire job.tick: exit %d: %s", code, errOut)
	}
	code, out, errOut := trigger(t, u, "--tick", "a")
	if code != 65 || out != "" {
		t.Fatalf("run beside a lease at job.tick: exit %d, stdout %q; want 65 and the command not run; stderr:\n%s", code, out, errOut)
	}
	if strings.Contains(errOut, "remove") || !strings.Contains(errOut, "lease") {
		t.Errorf("stderr %q: want it to say a lease is there, without advice to remove it", errOut)
	}
}
