package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/driver"
	"github.com/objlease/objlease/providers/faulty"
	"github.com/objlease/objlease/providers/mem"
)

// registerNonAtomic registers the scheme "nonatomic": a memory store
// whose conditional writes are right one at a time and not atomic. It is
// registered by the test, not in an init, so that the objlease the scripts
// run does not know it, and once, however often the test runs.
var registerNonAtomic = sync.OnceValue(func() error {
	return providers.Register("nonatomic", func(_ context.Context, u *url.URL, _ providers.OpenOptions) (*providers.Bucket, string, error) {
		f, err := faulty.New(mem.NewDriver(), faulty.Config{Seed: 1, CheckThenWrite: 2 * time.Millisecond})
		if err != nil {
			return nil, "", err
		}
		return providers.NewBucket(f), strings.TrimPrefix(u.Path, "/"), nil
	})
})

// TestDoctorNonAtomicStore: doctor on a store whose conditional writes are
// right one at a time and not atomic calls it unsafe, exits 1 and shows the
// races that went wrong.
func TestDoctorNonAtomicStore(t *testing.T) {
	if err := registerNonAtomic(); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		c := &cli{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
		code := c.main(context.Background(), args)
		return code, stdout.String(), stderr.String()
	}

	code, out, errOut := run("doctor", "nonatomic://s/p/")
	if code != 1 {
		t.Fatalf("doctor exited %d, want 1 (unsafe); stderr:\n%s", code, errOut)
	}
	for _, want := range []string{
		`(?m)^verdict: +UNSAFE`,
		`(?m)^failed: +create race \(If-None-Match: \* is not atomic\): \d of 8 rounds of 8 writers went wrong, first round \d: \d of 8 writers succeeded$`,
		`(?m)^race: +create: 8 rounds of 8 writers; .*; unsafe$`,
		`(?m)^race: +replace: 8 rounds of 8 writers; .*; unsafe$`,
		`(?m)^race: +delete-replace: 8 rounds of 8 writers; .*; unsafe$`,
		`(?m)^race: +delete-delete: 8 rounds of 8 writers; .*only deletes won and the object is gone \(allowed\).*; safe$`,
		`(?m)^missing: +replace answered ErrPrecondition, delete answered ErrPrecondition$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("stdout lacks %s:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "leases on it would not be exclusive") {
		t.Errorf("stderr %q does not say why", errOut)
	}

	code, out, _ = run("doctor", "-o", "json", "nonatomic://s/p/")
	var d diagnosis
	if err := json.Unmarshal([]byte(out), &d); err != nil || code != 1 {
		t.Fatalf("doctor -o json exited %d: %v: %s", code, err, out)
	}
	if d.Safe || len(d.Races) != 4 || d.MissingDelete != "ErrPrecondition" {
		t.Fatalf("diagnosis %+v", d)
	}
	for _, r := range d.Races {
		if r.Kind == "delete-delete" {
			if r.Verdict != "safe" || r.Repeated == 0 {
				t.Errorf("race %+v, want safe with repeated deletes", r)
			}
			continue
		}
		if r.Verdict != "unsafe" || len(r.Failures) == 0 || len(r.Winners) != 9 || r.Winners[1] == 8 {
			t.Errorf("race %+v, want unsafe", r)
		}
	}
}

// delIgnoring ignores If-Match on DELETE and enforces every other
// condition, as MinIO does. It is a driver over a mem driver.
type delIgnoring struct{ driver.Driver }

func (s delIgnoring) Delete(ctx context.Context, key, _ string) error {
	a, err := s.Stat(ctx, key)
	if err != nil {
		return nil // a DELETE of a missing key succeeds
	}
	return s.Driver.Delete(ctx, key, a.Version)
}

// registerDelIgnoring registers the scheme "delignoring" once, however
// often the test runs.
var registerDelIgnoring = sync.OnceValue(func() error {
	return providers.Register("delignoring", func(_ context.Context, u *url.URL, _ providers.OpenOptions) (*providers.Bucket, string, error) {
		return providers.NewBucket(delIgnoring{mem.NewDriver()}), strings.TrimPrefix(u.Path, "/"), nil
	})
})

// TestDoctorUnconditionalDelete: doctor on a store that enforces
// conditional writes and ignores If-Match on DELETE calls it safe (no lease
// or fenced write is a delete), exits 0, and names what it lacks in a
// caveat and in the JSON.
func TestDoctorUnconditionalDelete(t *testing.T) {
	if err := registerDelIgnoring(); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	c := &cli{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
	if code := c.main(context.Background(), []string{"doctor", "delignoring://s/p/"}); code != 0 {
		t.Fatalf("doctor exited %d, want 0 (safe); stdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	for _, want := range []string{
		`(?m)^verdict: +safe: .*; conditional DELETE not enforced \(see the caveats\)$`,
		`(?m)^caveat: +delete with a stale version succeeded \(If-Match ignored on DELETE\): .*batch collect deletes only orphans`,
	} {
		if !regexp.MustCompile(want).MatchString(stdout.String()) {
			t.Errorf("stdout lacks %s:\n%s", want, stdout.String())
		}
	}
	stdout.Reset()
	if code := c.main(context.Background(), []string{"doctor", "-o", "json", "delignoring://s/p/"}); code != 0 {
		t.Fatalf("doctor -o json exited %d; stderr:\n%s", code, stderr.String())
	}
	var d map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &d); err != nil {
		t.Fatal(err)
	}
	if d["safe"] != true || d["delete_unconditional"] != true {
		t.Errorf("safe %v, delete_unconditional %v; want both true: %s", d["safe"], d["delete_unconditional"], stdout.String())
	}
}
