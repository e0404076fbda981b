package integration

// What a user of the command meets when the store is not what they think,
// run through the real binary: the exit code, the one line on stderr, and
// that the command ends. Each command gets a generous deadline, so that one
// that hangs or retries for ever fails the test instead of blocking it.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/objlease/objlease/integration/emulator"
)

// commandBound is the most a command may take before it counts as a hang.
const commandBound = 60 * time.Second

var cli struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// objleaseBin builds the command from the root module, once per test
// binary.
func objleaseBin(t testing.TB) string {
	t.Helper()
	cli.once.Do(func() {
		cli.dir, cli.err = os.MkdirTemp("", "objlease-cli-")
		if cli.err != nil {
			return
		}
		cli.path = filepath.Join(cli.dir, "objlease")
		cmd := exec.Command("go", "build", "-o", cli.path, "./cmd/objlease")
		cmd.Dir = ".." // the root module; this one replaces it with ../
		if out, err := cmd.CombinedOutput(); err != nil {
			cli.err = errors.New("go build ./cmd/objlease: " + err.Error() + "\n" + string(out))
		}
	})
	if cli.err != nil {
		t.Fatal(cli.err)
	}
	return cli.path
}

// removeCLI removes the built command; TestMain calls it.
func removeCLI() {
	if cli.dir != "" {
		os.RemoveAll(cli.dir)
	}
}

// outcome is how a command ended.
type outcome struct {
	code           int
	stdout, stderr string
}

// runCLI runs the command with env added to a clean environment.
func runCLI(t *testing.T, env []string, args ...string) outcome {
	t.Helper()
	return runCLIInput(t, env, "", args...)
}

// runCLIInput is runCLI with input on the command's standard input.
func runCLIInput(t *testing.T, env []string, input string, args ...string) outcome {
	t.Helper()
	bin := objleaseBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), commandBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	home := t.TempDir()
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home,
		// No credentials or configuration of the machine's own.
		"AWS_CONFIG_FILE=" + filepath.Join(home, "aws-config"),
		"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(home, "aws-credentials"),
		"AWS_EC2_METADATA_DISABLED=true",
	}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(input), &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("objlease %s did not end within %v; stderr so far:\n%s", strings.Join(args, " "), commandBound, stderr.String())
	}
	o := outcome{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		o.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("objlease %s: %v", strings.Join(args, " "), err)
	}
	return o
}

// sdkNoise is what an SDK's message carries and the user's line must not.
var sdkNoise = regexp.MustCompile(`RequestID|HostID|<Error>|<\?xml|operation error|RESPONSE \d|ERROR CODE|googleapi:`)

// want fails t unless the command exited code with exactly one line on
// stderr that matches line.
func (o outcome) want(t *testing.T, code int, line string) {
	t.Helper()
	if o.code != code {
		t.Errorf("exit %d, want %d; stderr:\n%s", o.code, code, o.stderr)
	}
	if !regexp.MustCompile(`\Aobjlease: ` + line + `\n\z`).MatchString(o.stderr) {
		t.Errorf("stderr:\n%s\nwant one line matching\nobjlease: %s", o.stderr, line)
	}
	if sdkNoise.MatchString(o.stderr) {
		t.Errorf("stderr carries the SDK's message:\n%s", o.stderr)
	}
}

func s3CLIEnv(e *emulator.S3, accessKey, secret string) []string {
	return []string{"AWS_ACCESS_KEY_ID=" + accessKey, "AWS_SECRET_ACCESS_KEY=" + secret, "AWS_REGION=" + e.Region}
}

func s3CLIURL(endpoint, bucket, key string) string {
	return "s3://" + bucket + "/" + key + "?endpoint=" + url.QueryEscape(endpoint)
}

// withPort is an Azure connection string whose blob endpoint is at hostPort.
func withPort(connectionString, hostPort string) string {
	return regexp.MustCompile(`127\.0\.0\.1:\d+`).ReplaceAllString(connectionString, hostPort)
}

// The row of the table each test stands for is in its comment.

// `objlease run 's3://nobucket/a?endpoint=…'` (no --timeout) retried for
// ever; `run --timeout 5s` exited 75 as if the lease were held.
func TestCLIMissingBucketS3(t *testing.T) {
	e := emulator.VersityGW(t)
	env := s3CLIEnv(e, e.AccessKey, e.SecretKey)
	bucket := randomName()
	u := s3CLIURL(e.Endpoint, bucket, "a")
	line := `run s3://` + bucket + `/a\S*: bucket "` + bucket + `" does not exist \(check the name or AWS_ENDPOINT_URL\)`
	t.Run("no timeout", func(t *testing.T) {
		runCLI(t, env, "run", u, "--", "true").want(t, 78, line)
	})
	t.Run("timeout", func(t *testing.T) {
		runCLI(t, env, "run", "--timeout", "5s", u, "--", "true").want(t, 78, line)
	})
	t.Run("inspect", func(t *testing.T) {
		runCLI(t, env, "inspect", u).want(t, 78, `inspect s3://`+bucket+`/a\S*: bucket "`+bucket+`" does not exist \(check the name or AWS_ENDPOINT_URL\)`)
	})
}

// Missing GCS bucket: inspect said "no lease" (exit 1).
func TestCLIMissingBucketGCS(t *testing.T) {
	g := emulator.FakeGCS(t)
	bucket := randomName()
	env := []string{"STORAGE_EMULATOR_HOST=" + g.Host}
	for _, cmd := range []string{"inspect", "run"} {
		t.Run(cmd, func(t *testing.T) {
			args := []string{cmd, "gs://" + bucket + "/a"}
			if cmd == "run" {
				args = append(args, "--", "true")
			}
			runCLI(t, env, args...).want(t, 78, cmd+` gs://`+bucket+`/a: bucket "`+bucket+`" does not exist \(check the name or STORAGE_EMULATOR_HOST\)`)
		})
	}
}

// Missing Azure container: exit 64 "invalid key".
func TestCLIMissingContainerAzure(t *testing.T) {
	a := emulator.Azurite(t)
	name := randomName()
	env := []string{"AZURE_STORAGE_CONNECTION_STRING=" + a.ConnectionString}
	for _, cmd := range []string{"inspect", "run"} {
		t.Run(cmd, func(t *testing.T) {
			args := []string{cmd, "azblob://" + name + "/a"}
			if cmd == "run" {
				args = append(args, "--", "true")
			}
			runCLI(t, env, args...).want(t, 78, cmd+` azblob://`+name+`/a: container "`+name+`" does not exist \(check the name or AZURE_STORAGE_CONNECTION_STRING\)`)
		})
	}
}

// Wrong S3 keys, run: retried for ever, with a multi-line warning
// carrying the SDK's XML every 9 s.
func TestCLIWrongCredentialsS3(t *testing.T) {
	e := emulator.VersityGW(t)
	u := s3CLIURL(e.Endpoint, e.Bucket, emulator.Prefix(t)+"a")
	for _, c := range []struct{ name, key, secret string }{
		{"wrong secret", e.AccessKey, "not-" + e.SecretKey},
		{"unknown key", "AKIDNOBODYHAS", e.SecretKey},
	} {
		t.Run(c.name, func(t *testing.T) {
			runCLI(t, s3CLIEnv(e, c.key, c.secret), "run", u, "--", "true").want(t, 78,
				`run s3://\S+: the store refused the credentials \(check AWS_PROFILE, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY\)`)
		})
	}
}

// run/acquire --timeout 0 with the store not running hung, "write outcome
// unknown; re-reading" for ever; without --timeout it must retry, and a
// --timeout that ends the wait reports the store, not a holder.
func TestCLIStoreNotRunning(t *testing.T) {
	closed := closedPort(t)
	unreachable := `store unreachable: dial tcp ` + regexp.QuoteMeta(closed) + `: connect: connection refused \(check \?endpoint= or `
	for _, s := range []struct {
		name, url, hint string
		env             []string
	}{
		{"s3", s3CLIURL("http://"+closed, "bkt", "a"), "AWS_ENDPOINT_URL", []string{"AWS_ACCESS_KEY_ID=k", "AWS_SECRET_ACCESS_KEY=s", "AWS_REGION=us-east-1"}},
		{"gcs", "gs://bkt/a", "STORAGE_EMULATOR_HOST", []string{"STORAGE_EMULATOR_HOST=" + closed}},
		{"azure", "azblob://leases/a", "AZURE_STORAGE_CONNECTION_STRING", []string{"AZURE_STORAGE_CONNECTION_STRING=" + withPort(emulatorAzureConnectionString, closed)}},
	} {
		t.Run(s.name, func(t *testing.T) {
			tail := unreachable + s.hint + `, and the network\)`
			runCLI(t, s.env, "run", "--timeout", "0", s.url, "--", "true").want(t, 69, `run `+regexp.QuoteMeta(s.url)+`: `+tail)
			runCLI(t, s.env, "acquire", "--timeout", "0", s.url).want(t, 69, `acquire `+regexp.QuoteMeta(s.url)+`: `+tail)
			o := runCLI(t, s.env, "acquire", "--timeout", "3s", s.url)
			if o.code != 69 || !strings.Contains(o.stderr, "within --timeout 3s; the store was failing: store unreachable") {
				t.Errorf("acquire --timeout 3s: exit %d, want 69 naming the store's failure; stderr:\n%s", o.code, o.stderr)
			}
			if n := strings.Count(o.stderr, "\n"); n != 2 {
				t.Errorf("acquire --timeout 3s: %d lines, want one warning for the streak and the error:\n%s", n, o.stderr)
			}
		})
	}
}

// The account key Azurite accepts, in a connection string of its form.
const emulatorAzureConnectionString = "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;BlobEndpoint=http://127.0.0.1:1/devstoreaccount1;"

// STORAGE_EMULATOR_HOST with nothing listening: inspect and list hung
// silently.
func TestCLIEmulatorHostNotListeningGCS(t *testing.T) {
	closed := closedPort(t)
	env := []string{"STORAGE_EMULATOR_HOST=" + closed}
	tail := `store unreachable: dial tcp ` + regexp.QuoteMeta(closed) + `: connect: connection refused \(check \?endpoint= or STORAGE_EMULATOR_HOST, and the network\)`
	runCLI(t, env, "inspect", "gs://bkt/k").want(t, 69, `inspect gs://bkt/k: `+tail)
	runCLI(t, env, "list", "gs://bkt/").want(t, 69, `list gs://bkt/: `+tail)
}

// gs://…?endpoint=http://127.0.0.1:4443 (no /storage/v1/): inspect said
// "no lease" about an existing lease; doctor said UNSAFE and left
// _objlease-probe-* objects behind. The server's address now means the API
// below it; an endpoint with a path no API serves is refused as such.
func TestCLIWrongEndpointGCS(t *testing.T) {
	g := emulator.FakeGCS(t)
	prefix := emulator.Prefix(t)
	key := prefix + "lease"
	good := openURL(t, gcsURL(g.Endpoint, g.Bucket, ""))
	server := "http://" + g.Host
	at := func(endpoint, key string) string {
		return "gs://" + g.Bucket + "/" + key + "?endpoint=" + url.QueryEscape(endpoint)
	}
	if o := runCLI(t, nil, "acquire", "--holder", "alice", "--ttl", "1h", at(g.Endpoint, key)); o.code != 0 {
		t.Fatalf("acquire: exit %d; stderr:\n%s", o.code, o.stderr)
	}
	t.Cleanup(func() {
		if a, err := good.Stat(context.Background(), key); err == nil {
			good.Delete(context.Background(), key, a.Version)
		}
	})
	leftBehind := func() {
		t.Helper()
		page, err := good.List(t.Context(), prefix, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Objects {
			if o.Key != key {
				t.Errorf("left %q behind", o.Key)
			}
		}
	}

	t.Run("server address", func(t *testing.T) {
		out, err := exec.Command(objleaseBin(t), "inspect", "-o", "json", at(server, key)).Output()
		if err != nil || !strings.Contains(string(out), `"holder":"alice"`) {
			t.Errorf("inspect -o json: %s, %v; want alice's lease", out, err)
		}
		o := runCLI(t, nil, "doctor", at(server, prefix))
		if o.code != 0 {
			t.Errorf("doctor: exit %d, want 0; stderr:\n%s", o.code, o.stderr)
		}
		leftBehind()
	})
	t.Run("no API there", func(t *testing.T) {
		wrong := server + "/not-the-api/"
		line := `%s gs://\S+: endpoint does not serve the store's API: bucket "` + g.Bucket + `": the endpoint answered a page no Cloud Storage API serves \(.*\): .* \(check \?endpoint= or STORAGE_EMULATOR_HOST\)`
		runCLI(t, nil, "inspect", at(wrong, key)).want(t, 78, strings.Replace(line, "%s", "inspect", 1))
		runCLI(t, nil, "doctor", at(wrong, prefix)).want(t, 78, strings.Replace(line, "%s", "doctor", 1))
		leftBehind()
	})
}

// An s3:// URL whose endpoint is a GCS server: inspect said "no lease"
// (exit 1) and acquire retried "precondition failed". Every command now
// says the endpoint does not serve the S3 API, exit 78.
func TestCLIWrongEndpointS3AtGCS(t *testing.T) {
	g := emulator.FakeGCS(t)
	env := []string{"AWS_ACCESS_KEY_ID=k", "AWS_SECRET_ACCESS_KEY=s", "AWS_REGION=us-east-1"}
	u := s3CLIURL("http://"+g.Host, g.Bucket, emulator.Prefix(t)+"a")
	line := `%s s3://\S+: endpoint does not serve the store's API: bucket "` + g.Bucket + `": the endpoint answered \d+ without an S3 error in the reply \(check \?endpoint= or AWS_ENDPOINT_URL\)`
	runCLI(t, env, "inspect", u).want(t, 78, strings.Replace(line, "%s", "inspect", 1))
	runCLI(t, env, "acquire", "--timeout", "0", u).want(t, 78, strings.Replace(line, "%s", "acquire", 1))
	runCLI(t, env, "run", "--timeout", "0", u, "--", "true").want(t, 78, strings.Replace(line, "%s", "run", 1))
	// Its XML API lists the bucket, with a listing no S3 server sends.
	runCLI(t, env, "list", s3CLIURL("http://"+g.Host, g.Bucket, "")).want(t, 78,
		`list s3://\S+: endpoint does not serve the store's API: bucket "`+g.Bucket+`": the endpoint answered a listing without IsTruncated, which every S3 listing has \(check \?endpoint= or AWS_ENDPOINT_URL\)`)
}

// An S3 endpoint that answers 404 with no body to everything (a wrong host
// behind a proxy) read as an empty bucket: inspect said "no lease" (1),
// acquire "precondition failed" (69), list printed an empty table (0).
// No S3 server answers a GET, PUT or listing so: every command says the
// endpoint does not serve the S3 API, exit 78.
func TestCLIWrongEndpointS3BareNotFound(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusNotFound)
	}))
	t.Cleanup(srv.Close)
	env := []string{"AWS_ACCESS_KEY_ID=k", "AWS_SECRET_ACCESS_KEY=s", "AWS_REGION=us-east-1"}
	u := s3CLIURL(srv.URL, "bkt", "a")
	line := `%s s3://\S+: endpoint does not serve the store's API: bucket "bkt": the endpoint answered 404 without an S3 error in the reply \(check \?endpoint= or AWS_ENDPOINT_URL\)`
	for _, args := range [][]string{
		{"inspect", u}, {"acquire", "--timeout", "0", u}, {"run", "--timeout", "0", u, "--", "true"},
		{"release", "--holder", "h", u}, {"list", s3CLIURL(srv.URL, "bkt", "")}, {"doctor", u},
		{"group", s3CLIURL(srv.URL, "bkt", "g/")}, {"batch", "show", s3CLIURL(srv.URL, "bkt", "out/")},
	} {
		name := args[0]
		if name == "batch" {
			name += " " + args[1]
		}
		runCLI(t, env, args...).want(t, 78, strings.Replace(line, "%s", name, 1))
	}
}

// An https:// endpoint at a port that speaks plain HTTP read as an
// unreachable store (69, "check the network"). It is the URL's mistake:
// every store says the endpoint does not speak TLS, exit 78.
func TestCLIHTTPSAtHTTPEndpoint(t *testing.T) {
	s3e, g, a := emulator.VersityGW(t), emulator.FakeGCS(t), emulator.Azurite(t)
	https := func(endpoint string) string { return strings.Replace(endpoint, "http://", "https://", 1) }
	for _, tc := range []struct {
		name, url string
		env       []string
	}{
		{"s3", s3CLIURL(https(s3e.Endpoint), s3e.Bucket, "a"), s3CLIEnv(s3e, s3e.AccessKey, s3e.SecretKey)},
		{"gcs", "gs://" + g.Bucket + "/a", []string{"STORAGE_EMULATOR_HOST=https://" + g.Host}},
		{"azblob", "azblob://" + a.Container + "/a", []string{"AZURE_STORAGE_CONNECTION_STRING=" + strings.Replace(a.ConnectionString, "http://", "https://", 1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runCLI(t, tc.env, "inspect", tc.url).want(t, 78, `inspect \S+: endpoint does not serve the store's API: it does not speak TLS, but the endpoint is https:// \(an http:// endpoint\?\).*`)
		})
	}
}

// No credentials at all for S3: a run retried for ever with the SDK's
// "failed to refresh cached credentials" message; now one line, exit 78.
func TestCLINoCredentialsS3(t *testing.T) {
	e := emulator.MinIO(t)
	u := s3CLIURL(e.Endpoint, e.Bucket, emulator.Prefix(t)+"a")
	env := []string{"AWS_REGION=" + e.Region}
	line := `%s s3://\S+: no credentials found \(set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY\)`
	runCLI(t, env, "run", u, "--", "true").want(t, 78, strings.Replace(line, "%s", "run", 1))
	runCLI(t, env, "inspect", u).want(t, 78, strings.Replace(line, "%s", "inspect", 1))
}

// Endpoints that are not the store's API, told as such rather than as a
// missing bucket or a store failure; exit 78 each.
func TestCLIWrongEndpointNotABucket(t *testing.T) {
	env := []string{"AWS_ACCESS_KEY_ID=k", "AWS_SECRET_ACCESS_KEY=s", "AWS_REGION=us-east-1"}

	// A listing of a bucket fake-gcs-server lacks, through its XML API as
	// an S3 endpoint: a 500 with an XML error S3 would not write. list
	// exited 69 with "500 InternalServerError" where inspect said 78.
	t.Run("S3 at a GCS server, missing bucket", func(t *testing.T) {
		g := emulator.FakeGCS(t)
		line := `%s s3://\S+: endpoint does not serve the store's API: bucket "nobucket": the endpoint answered \d+ without an S3 error in the reply \(check \?endpoint= or AWS_ENDPOINT_URL\)`
		runCLI(t, env, "list", s3CLIURL("http://"+g.Host, "nobucket", "")).want(t, 78, strings.Replace(line, "%s", "list", 1))
		runCLI(t, env, "list", s3CLIURL("http://"+g.Host, "nobucket", "p/")).want(t, 78, strings.Replace(line, "%s", "list", 1))
		runCLI(t, env, "inspect", s3CLIURL("http://"+g.Host, "nobucket", "a")).want(t, 78, strings.Replace(line, "%s", "inspect", 1))
	})

	// A GCS endpoint that answers 404 with no body to everything: the JSON
	// API always says why. It read as a missing bucket.
	t.Run("GCS endpoint answering bare 404s", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Length", "0")
			w.WriteHeader(http.StatusNotFound)
		}))
		t.Cleanup(srv.Close)
		u := "gs://bkt/a?endpoint=" + url.QueryEscape(srv.URL+"/storage/v1/")
		line := `%s gs://\S+: endpoint does not serve the store's API: bucket "bkt": the endpoint answered 404 with no body, which no Cloud Storage API does \(is the endpoint the JSON API root, …/storage/v1/\?\) \(check \?endpoint= or STORAGE_EMULATOR_HOST\)`
		for _, args := range [][]string{{"inspect", u}, {"acquire", "--timeout", "0", u}, {"list", "gs://bkt/?endpoint=" + url.QueryEscape(srv.URL+"/storage/v1/")}} {
			runCLI(t, nil, args...).want(t, 78, strings.Replace(line, "%s", args[0], 1))
		}
	})

	// An S3 server given as a GCS endpoint: its NoSuchBucket read as a
	// missing bucket, its 405 and 400 came raw.
	t.Run("S3 server as a GCS endpoint", func(t *testing.T) {
		s := emulator.VersityGW(t)
		at := func(key string) string {
			return "gs://" + s.Bucket + "/" + key + "?endpoint=" + url.QueryEscape(s.Endpoint)
		}
		line := `%s gs://\S+: endpoint does not serve the store's API: bucket "` + s.Bucket + `": the endpoint answered as an S3 server does \(an x-amz-request-id in the reply\), not as Cloud Storage: an S3 store takes an s3:// URL \(check \?endpoint= or STORAGE_EMULATOR_HOST\)`
		for _, args := range [][]string{{"inspect", at("a")}, {"acquire", "--timeout", "0", at("a")}, {"list", at("")}} {
			runCLI(t, nil, args...).want(t, 78, strings.Replace(line, "%s", args[0], 1))
		}
	})

	// An S3 endpoint with a path: the requests carry it before the bucket,
	// and the store looks for another. It said only that the bucket does
	// not exist.
	t.Run("S3 endpoint with a path", func(t *testing.T) {
		s := emulator.VersityGW(t)
		wrong := strings.TrimSuffix(s.Endpoint, "/") + "/wrong"
		line := `%s s3://\S+: bucket "` + s.Bucket + `" does not exist at that endpoint, whose path /wrong S3 requests carry before the bucket: an S3 endpoint is the server's address alone \(http://127\.0\.0\.1:\d+\), or check the name`
		e := s3CLIEnv(s, s.AccessKey, s.SecretKey)
		runCLI(t, e, "inspect", s3CLIURL(wrong, s.Bucket, "a")).want(t, 78, strings.Replace(line, "%s", "inspect", 1))
		runCLI(t, e, "list", s3CLIURL(wrong, s.Bucket, "")).want(t, 78, strings.Replace(line, "%s", "list", 1))
	})
}
