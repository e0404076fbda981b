package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/fence"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/driver"
	"github.com/objlease/objlease/providers/s3store"
)

// A store error prints as one line: the portable cause and what to check,
// not the SDK's message with its request IDs.
func TestDescribe(t *testing.T) {
	sdk := errors.New("operation error S3: GetObject, https response error StatusCode: 404, RequestID: 1F2E3D, HostID: abc==, api error NoSuchBucket: <Error><Code>NoSuchBucket</Code></Error>")
	for _, tc := range []struct {
		err  error
		want string
	}{
		{opErr("inspect", "s3://b/k", providers.Wrap("get", "k", fmt.Errorf("%w: %q", s3store.ErrNoBucket, "b"), sdk)),
			`inspect s3://b/k: bucket "b" does not exist (check the name or AWS_ENDPOINT_URL)`},
		{opErr("list", "file:///d/", providers.Wrap("list", "x", fmt.Errorf("%w: names a file of the store's own", providers.ErrInvalidKey), nil)),
			`list file:///d/: the store does not accept the key "x": names a file of the store's own`},
		{opErr("inspect", "gs://b/k", providers.Wrap("get", "k", providers.ErrInvalidKey, fmt.Errorf("bucket %q does not exist: %w", "b", sdk))),
			`inspect gs://b/k: the store does not accept the key "k": bucket "b" does not exist`},
		// A bucket name the store refuses is the bucket's fault, not the key's.
		{opErr("inspect", "s3://bkt/lease", providers.Wrap("get", "lease", fmt.Errorf("%w %q", providers.ErrInvalidBucket, "bkt"), driver.Native("400 InvalidBucketName: The specified bucket is not valid.", sdk))),
			`inspect s3://bkt/lease: the store does not accept the bucket name "bkt": 400 InvalidBucketName: The specified bucket is not valid.`},
		{opErr("inspect", "azblob://leases/k", providers.Wrap("get", "k", fmt.Errorf("%w %q", providers.ErrInvalidBucket, "leases"), driver.Native("400 InvalidResourceName", sdk))),
			`inspect azblob://leases/k: the store does not accept the container name "leases": 400 InvalidResourceName`},
		{opErr("acquire", "s3://b/k", fmt.Errorf("lease %q: %w", "k", providers.Wrap("replace", "k", providers.ErrThrottled, sdk))),
			`acquire s3://b/k: lease "k": replace "k": throttled by store`},
		{opErr("inspect", "azblob://c/k", providers.Wrap("get", "k", fmt.Errorf("%w: %q", providers.ErrNoBucket, "c"), sdk)),
			`inspect azblob://c/k: container "c" does not exist (check the name or AZURE_STORAGE_CONNECTION_STRING)`},
		{opErr("acquire", "s3://b/k", providers.Wrap("create", "k", fmt.Errorf("%w for bucket %q", providers.ErrAccessDenied, "b"), driver.Native("403 AccessDenied: Access Denied.", sdk))),
			`acquire s3://b/k: create "k": access denied: the credentials were accepted, and lack the permission for this request (see docs/permissions.md)`},
		{opErr("run", "s3://b/k", providers.Wrap("create", "k", providers.ErrPermission, sdk)),
			`run s3://b/k: the store refused the credentials (check AWS_PROFILE, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)`},
		{opErr("acquire", "file:///d/k", fmt.Errorf("lease %q: %w", "k", providers.Wrap("create", "k", fmt.Errorf("%w: open /d/.objlease-lock.k: read-only file system", providers.ErrPermission),
			fmt.Errorf("lock: %w", &fs.PathError{Op: "open", Path: "/d/.objlease-lock.k", Err: syscall.EROFS})))),
			`acquire file:///d/k: permission denied: open /d/.objlease-lock.k: read-only file system (check that the directory is writable by this user and not mounted read-only)`},
		{opErr("inspect", "gs://b/k", providers.Wrap("get", "k", fmt.Errorf("%w: bucket %q", providers.ErrUnreachable, "b"), sdk)),
			`inspect gs://b/k: store unreachable: no connection could be made (check ?endpoint= or STORAGE_EMULATOR_HOST, and the network)`},
		{opErr("run", "s3://b/k", &storeTimeoutError{errors.New("lease not acquired within --timeout 5s"), providers.Wrap("create", "k", providers.ErrUnreachable, sdk)}),
			`run s3://b/k: lease not acquired within --timeout 5s; the store was failing: store unreachable: no connection could be made (check ?endpoint= or AWS_ENDPOINT_URL, and the network)`},
		{opErr("acquire", "file:///d/k", &objlease.Error{Key: "k", Err: objlease.ErrFencedObject, Reason: "object is a fenced data object"}),
			`acquire file:///d/k: the object at "k" is a fenced data object, not a lease record; it is never overwritten`},
		{opErr("run", "file:///d/k", &objlease.Error{Key: "k", Err: objlease.ErrHeld, Record: &objlease.Record{Holder: "alice", Token: 7}, Wait: 30300 * time.Millisecond}),
			`run file:///d/k: held by "alice" (token 7); this observer could take it over in 30.3s at the earliest, if its holder stops renewing`},
	} {
		got := describe(tc.err)
		if got != tc.want {
			t.Errorf("describe(%v)\n got %s\nwant %s", tc.err, got, tc.want)
		}
		if strings.Contains(got, "RequestID") {
			t.Errorf("describe shows the SDK's message: %s", got)
		}
	}
}

// docs/cli.md has the one table of exit codes: every code the command maps
// an error to is there, and nothing else is, and each row's errors map to
// its code.
func TestExitCodesMatchDocs(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Exit codes\n")
	if !ok {
		t.Fatal(`docs/cli.md has no "## Exit codes" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	row := regexp.MustCompile(`(?m)^\| ([0-9, ]+) \|`)
	var documented []int
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		for f := range strings.SplitSeq(m[1], ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				t.Fatalf("exit code %q in docs/cli.md: %v", f, err)
			}
			documented = append(documented, n)
		}
	}
	var mapped []int
	for _, r := range exitCodes {
		mapped = append(mapped, r.code)
		for _, e := range r.errs {
			if got := exitCodeOf(fmt.Errorf("wrapped: %w", e)); got != r.code {
				t.Errorf("%v exits %d, but its row says %d", e, got, r.code)
			}
		}
	}
	slices.Sort(documented)
	slices.Sort(mapped)
	if !slices.Equal(documented, mapped) {
		t.Errorf("exit codes in docs/cli.md %v, in the code %v", documented, mapped)
	}
	if exitCodeOf(errors.New("anything else")) != 69 {
		t.Error("an unknown error does not exit 69")
	}
	if exitCodeOf(exitStatus(7)) != 7 || exitCodeOf(interrupt{os.Interrupt}) != 130 {
		t.Error("a command's status or a signal is not passed through")
	}
}

// Only a held lease exits 75: a store that is not set up, or that could
// not be reached until --timeout ended the wait, exits with its own code.
func TestExitCodesOfStoreFailures(t *testing.T) {
	timeout := fmt.Errorf("%w within --timeout 5s", errNotAcquired)
	for _, tc := range []struct {
		err  error
		want int
	}{
		{providers.Wrap("create", "a", providers.ErrNoBucket, nil), 78},
		{providers.Wrap("create", "a", providers.ErrPermission, nil), 78},
		{providers.Wrap("get", "a", providers.ErrWrongEndpoint, nil), 78},
		{providers.Wrap("get", "a", providers.ErrUnreachable, nil), 69},
		{providers.Wrap("get", "a", providers.ErrInvalidKey, nil), 64},
		{fmt.Errorf("%w: %w", objlease.ErrAmbiguous, providers.Wrap("get", "a", providers.ErrPermission, nil)), 78},
		{&storeTimeoutError{timeout, providers.Wrap("create", "a", providers.ErrUnreachable, nil)}, 69},
		{&storeTimeoutError{timeout, providers.Wrap("create", "a", providers.ErrThrottled, nil)}, 69},
		{&timeoutError{timeout, &objlease.Error{Key: "a", Err: objlease.ErrHeld, Record: &objlease.Record{}}}, 75},
		{&objlease.Error{Key: "a", Err: objlease.ErrFencedObject}, 65},
		{fmt.Errorf("put: %w", fence.ErrLeaseRecord), 65},
		{fmt.Errorf("lease: %w", objlease.ErrTokenExhausted), 65},
	} {
		if got := exitCodeOf(opErr("run", "s3://b/a", tc.err)); got != tc.want {
			t.Errorf("%v exits %d, want %d", tc.err, got, tc.want)
		}
	}
}

// The command reads stdin through its own field, so a test drives put in
// this process.
func TestPutReadsItsStdin(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	c := &cli{stdin: strings.NewReader("report v1\n"), stdout: &stdout, stderr: &stderr}
	if code := c.main(context.Background(), []string{"put", "--token", "3", "file://" + dir + "/out/report"}); code != 0 {
		t.Fatalf("put exited %d: %s", code, &stderr)
	}
	store, _, err := providers.Open(context.Background(), "file://"+dir+"/")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	obj, err := store.Get(context.Background(), "out/report", 1<<10)
	if err != nil || string(obj.Data) != "report v1\n" {
		t.Fatalf("object holds %v (%v), want what stdin gave", obj, err)
	}
}

// Ages print as kubectl prints them, and never negative.
func TestHumanAge(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second: "0s", 0: "0s", 999 * time.Millisecond: "0s", 59 * time.Second: "59s",
		119*time.Second + 46*time.Millisecond: "119s", 2 * time.Minute: "2m", 5*time.Minute + 3*time.Second: "5m3s",
		45 * time.Minute: "45m", 3*time.Hour + 20*time.Minute: "3h20m", 30 * time.Hour: "30h",
		3*24*time.Hour + 5*time.Hour: "3d5h", 40 * 24 * time.Hour: "40d", 3 * 365 * 24 * time.Hour: "3y0d",
	} {
		if got := humanAge(d); got != want {
			t.Errorf("humanAge(%v) = %s, want %s", d, got, want)
		}
	}
}

// A list row keeps every field in JSON, zeros too: a fresh record's age is 0.
func TestListingJSONKeepsZeros(t *testing.T) {
	b, err := json.Marshal(listing{Key: "k", State: "held", Token: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{`"age_ms":0`, `"expires_in_ms":0`, `"holder":""`, `"ttl_ms":0`} {
		if !strings.Contains(string(b), f) {
			t.Errorf("%s lacks %s", b, f)
		}
	}
}

// TestWrongEndpointS3: an s3:// URL whose endpoint is another kind of
// server (a GCS emulator, a web server) exits 78 with one line that says
// the endpoint does not serve the API, whatever the command; not "no
// lease", nor a retry loop, nor "does not implement conditional writes".
func TestWrongEndpointS3(t *testing.T) {
	for _, srv := range []struct {
		name   string
		handle http.HandlerFunc
	}{
		{"not found page", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }},
		{"web server", func(w http.ResponseWriter, r *http.Request) {
			status := http.StatusNotFound
			if r.Method == http.MethodPut {
				status = http.StatusNotImplemented // python3 -m http.server
			}
			w.Header().Set("Content-Type", "text/html;charset=utf-8")
			w.WriteHeader(status)
			if r.Method != http.MethodHead {
				io.WriteString(w, "<!DOCTYPE HTML>\n<html><head><title>Error response</title></head><body><h1>Error response</h1></body></html>\n")
			}
		}},
	} {
		t.Run(srv.name, func(t *testing.T) {
			ts := httptest.NewServer(srv.handle)
			defer ts.Close()
			t.Setenv("AWS_ACCESS_KEY_ID", "k")
			t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
			t.Setenv("AWS_REGION", "us-east-1")
			t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
			t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
			q := "?endpoint=" + url.QueryEscape(ts.URL)
			for _, args := range [][]string{
				{"inspect", "s3://bkt/a" + q},
				{"run", "--timeout", "0", "s3://bkt/a" + q, "--", "true"},
				{"acquire", "--timeout", "0", "s3://bkt/a" + q},
				{"doctor", "s3://bkt/p/" + q},
			} {
				var stdout, stderr bytes.Buffer
				c := &cli{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
				code := c.main(context.Background(), args)
				want := `\Aobjlease: ` + args[0] + ` s3://bkt/\S+: endpoint does not serve the store's API: bucket "bkt": the endpoint answered \d+ without an S3 error in the reply \(check \?endpoint= or AWS_ENDPOINT_URL\)\n\z`
				if code != 78 || !regexp.MustCompile(want).MatchString(stderr.String()) {
					t.Errorf("%s: exit %d, stderr:\n%s\nwant exit 78 and one line matching %s", args[0], code, stderr.String(), want)
				}
			}
		})
	}
}
