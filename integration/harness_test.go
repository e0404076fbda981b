package integration

// Tests of the emulator harness itself, through the cloud SDKs a provider
// uses, so that a provider test failing means the provider, not the harness.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"google.golang.org/api/option"

	"github.com/objlease/objlease/integration/emulator"
)

// kv writes and reads one object through a store's own SDK, without
// retries: a request to a stopped emulator must fail at once.
type kv struct {
	put func(ctx context.Context, key string, data []byte) error
	get func(ctx context.Context, key string) ([]byte, error)
}

func s3KV(s *emulator.S3) (kv, *s3.Client) {
	c := s3.New(s3.Options{
		Region:           s.Region,
		BaseEndpoint:     aws.String(s.Endpoint),
		UsePathStyle:     true,
		Credentials:      credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
		RetryMaxAttempts: 1,
	})
	return kv{
		put: func(ctx context.Context, key string, data []byte) error {
			_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &s.Bucket, Key: &key, Body: bytes.NewReader(data)})
			return err
		},
		get: func(ctx context.Context, key string) ([]byte, error) {
			out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.Bucket, Key: &key})
			if err != nil {
				return nil, err
			}
			defer out.Body.Close()
			return io.ReadAll(out.Body)
		},
	}, c
}

func gcsKV(t *testing.T, g *emulator.GCS) kv {
	c, err := storage.NewClient(context.Background(), option.WithEndpoint(g.Endpoint), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetRetry(storage.WithPolicy(storage.RetryNever))
	b := c.Bucket(g.Bucket)
	return kv{
		put: func(ctx context.Context, key string, data []byte) error {
			w := b.Object(key).NewWriter(ctx)
			if _, err := w.Write(data); err != nil {
				w.Close()
				return err
			}
			return w.Close()
		},
		get: func(ctx context.Context, key string) ([]byte, error) {
			r, err := b.Object(key).NewReader(ctx)
			if err != nil {
				return nil, err
			}
			defer r.Close()
			return io.ReadAll(r)
		},
	}
}

func azureKV(t *testing.T, a *emulator.Azure) kv {
	c, err := azblob.NewClientFromConnectionString(a.ConnectionString, &azblob.ClientOptions{
		ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: -1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return kv{
		put: func(ctx context.Context, key string, data []byte) error {
			_, err := c.UploadBuffer(ctx, a.Container, key, data, nil)
			return err
		},
		get: func(ctx context.Context, key string) ([]byte, error) {
			resp, err := c.DownloadStream(ctx, a.Container, key, nil)
			if err != nil {
				return nil, err
			}
			defer resp.Body.Close()
			return io.ReadAll(resp.Body)
		},
	}
}

func roundTrip(t *testing.T, s kv, key string) {
	t.Helper()
	ctx := context.Background()
	want := []byte("payload of " + key)
	if err := s.put(ctx, key, want); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	got, err := s.get(ctx, key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("get %s = %q, want %q", key, got, want)
	}
}

func TestSharedEmulatorsServeTheirBucket(t *testing.T) {
	t.Run("versitygw", func(t *testing.T) {
		s, _ := s3KV(emulator.VersityGW(t))
		roundTrip(t, s, emulator.Prefix(t)+"obj")
	})
	t.Run("s3rver", func(t *testing.T) {
		s, _ := s3KV(emulator.S3rver(t))
		roundTrip(t, s, emulator.Prefix(t)+"obj")
	})
	t.Run("fake-gcs-server", func(t *testing.T) {
		roundTrip(t, gcsKV(t, emulator.FakeGCS(t)), emulator.Prefix(t)+"obj")
	})
	t.Run("azurite", func(t *testing.T) {
		roundTrip(t, azureKV(t, emulator.Azurite(t)), emulator.Prefix(t)+"obj")
	})
}

// The two S3 servers differ in exactly what the provider tests rely on:
// versitygw refuses a create over an existing key, s3rver does not.
func TestS3EmulatorsPreconditions(t *testing.T) {
	createTwice := func(t *testing.T, s *emulator.S3) error {
		_, c := s3KV(s)
		key := emulator.Prefix(t) + "obj"
		var err error
		for range 2 {
			_, err = c.PutObject(context.Background(), &s3.PutObjectInput{
				Bucket: &s.Bucket, Key: &key, Body: strings.NewReader("x"), IfNoneMatch: aws.String("*"),
			})
		}
		return err
	}
	t.Run("versitygw", func(t *testing.T) {
		err := createTwice(t, emulator.VersityGW(t))
		var apiErr smithy.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "PreconditionFailed" {
			t.Fatalf("second If-None-Match:* put = %v, want PreconditionFailed", err)
		}
	})
	t.Run("s3rver", func(t *testing.T) {
		if err := createTwice(t, emulator.S3rver(t)); err != nil {
			t.Fatalf("second If-None-Match:* put = %v, want it accepted (s3rver ignores preconditions)", err)
		}
	})
}

// privates starts each emulator that has a private form.
var privates = []struct {
	name  string
	start func(t *testing.T) (kv, *emulator.Process)
}{
	{"versitygw", func(t *testing.T) (kv, *emulator.Process) {
		s, p := emulator.StartVersityGW(t)
		c, _ := s3KV(s)
		return c, p
	}},
	{"fake-gcs-server", func(t *testing.T) (kv, *emulator.Process) {
		g, p := emulator.StartFakeGCS(t)
		return gcsKV(t, g), p
	}},
	{"azurite", func(t *testing.T) (kv, *emulator.Process) {
		a, p := emulator.StartAzurite(t)
		return azureKV(t, a), p
	}},
}

func TestPrivateEmulatorKeepsDataAcrossRestart(t *testing.T) {
	for _, e := range privates {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			s, p := e.start(t)
			key := emulator.Prefix(t) + "obj"
			roundTrip(t, s, key)
			port := p.Port()

			p.Stop()
			if _, err := s.get(context.Background(), key); err == nil {
				t.Fatalf("get %s from a stopped %s succeeded", key, p.Name())
			}

			p.Restart(t)
			if p.Port() != port {
				t.Fatalf("restarted on port %d, want %d", p.Port(), port)
			}
			got, err := s.get(context.Background(), key)
			if err != nil {
				t.Fatalf("get %s after restart: %v\n%s", key, err, p.Log())
			}
			if want := "payload of " + key; string(got) != want {
				t.Fatalf("get %s after restart = %q, want %q", key, got, want)
			}
		})
	}
}

func TestPausedEmulatorHangs(t *testing.T) {
	for _, e := range privates {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			s, p := e.start(t)
			key := emulator.Prefix(t) + "obj"
			roundTrip(t, s, key)

			p.Pause()
			// The deadline only bounds the wait: a paused store never answers.
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			_, err := s.get(ctx, key)
			if err == nil || ctx.Err() == nil {
				t.Fatalf("get %s from a paused %s = %v before its deadline, want it to hang", key, p.Name(), err)
			}

			p.Resume()
			if _, err := s.get(context.Background(), key); err != nil {
				t.Fatalf("get %s after resume: %v", key, err)
			}
		})
	}
}

// Container mode must not fall back to local processes, nor process mode
// start containers.
func TestEmulatorsRunInTheAskedMode(t *testing.T) {
	docker := os.Getenv("OBJLEASE_EMULATORS") == "docker"
	for _, e := range privates {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			_, p := e.start(t)
			id := p.ContainerID()
			switch {
			case docker && id == "":
				t.Fatalf("OBJLEASE_EMULATORS=docker, but %s runs as a local process (pid %d)", p.Name(), p.Pid())
			case !docker && id != "":
				t.Fatalf("%s runs in container %s, but OBJLEASE_EMULATORS is not docker", p.Name(), id)
			case !docker && parentPid(p.Pid()) != os.Getpid():
				t.Fatalf("%s (pid %d) is not a child of the test binary", p.Name(), p.Pid())
			}
			if p.Pid() == 0 || !alive(p.Pid()) {
				t.Fatalf("%s: pid %d does not run", p.Name(), p.Pid())
			}
		})
	}
}

func TestPrefix(t *testing.T) {
	a, b := emulator.Prefix(t), emulator.Prefix(t)
	if a == b {
		t.Fatalf("Prefix returned %q twice", a)
	}
	if ok := regexp.MustCompile(`^t/TestPrefix-[0-9a-f]{16}/$`).MatchString(a); !ok {
		t.Fatalf("Prefix = %q, want t/TestPrefix-<hex>/", a)
	}
	t.Run("odd name: spaces/slashes?&%", func(t *testing.T) {
		p := emulator.Prefix(t)
		if ok := regexp.MustCompile(`^t/TestPrefix-[A-Za-z0-9._-]+-[0-9a-f]{16}/$`).MatchString(p); !ok {
			t.Fatalf("Prefix = %q, want only [A-Za-z0-9._-] between t/ and the final /", p)
		}
	})
}

// verdict records how a harness call ended a test, without ending this one.
type verdict struct {
	testing.TB
	how, msg string
}

// stop ends the harness call the way runtime.Goexit ends a test.
type stop struct{}

func (v *verdict) Fatal(args ...any)                 { v.end("fatal", fmt.Sprint(args...)) }
func (v *verdict) Fatalf(format string, args ...any) { v.end("fatal", fmt.Sprintf(format, args...)) }
func (v *verdict) Skip(args ...any)                  { v.end("skip", fmt.Sprint(args...)) }
func (v *verdict) Skipf(format string, args ...any)  { v.end("skip", fmt.Sprintf(format, args...)) }
func (v *verdict) end(how, msg string)               { v.how, v.msg = how, msg; panic(stop{}) }

func (v *verdict) call(f func(testing.TB)) {
	defer func() {
		if r := recover(); r != nil && r != (stop{}) {
			panic(r)
		}
	}()
	f(v)
}

// In container mode too: these are about local processes.
func TestMissingEmulatorFailsInCIAndSkipsElsewhere(t *testing.T) {
	t.Setenv("OBJLEASE_EMULATORS", "process")
	t.Setenv("OBJLEASE_EMULATORS_DIR", t.TempDir())
	for _, ci := range []string{"true", ""} {
		t.Setenv("CI", ci)
		v := &verdict{TB: t}
		v.call(func(tb testing.TB) { emulator.StartVersityGW(tb) })
		want := map[string]string{"true": "fatal", "": "skip"}[ci]
		if v.how != want || !strings.Contains(v.msg, "install-emulators.sh") {
			t.Errorf("CI=%q: missing versitygw ended the test with %s %q, want %s naming the install script", ci, v.how, v.msg, want)
		}
	}
}

func TestEmulatorThatDiesAtStartFailsWithItsLog(t *testing.T) {
	t.Setenv("OBJLEASE_EMULATORS", "process")
	dir := t.TempDir()
	if err := os.Mkdir(dir+"/bin", 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\necho 'bad flag --port' >&2\nexit 3\n"
	if err := os.WriteFile(dir+"/bin/versitygw", []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OBJLEASE_EMULATORS_DIR", dir)
	v := &verdict{TB: t}
	v.call(func(tb testing.TB) { emulator.StartVersityGW(tb) })
	if v.how != "fatal" || !strings.Contains(v.msg, "exited before it answered") || !strings.Contains(v.msg, "bad flag --port") {
		t.Fatalf("an emulator exiting at start ended the test with %s %q, want fatal with its log", v.how, v.msg)
	}
}

// A test binary that dies without cleaning up must not leave its emulator
// running. The test runs itself as a child that starts an emulator and
// kills itself with SIGKILL. A local process dies with it (Pdeathsig); a
// container is removed by the reaper.
func TestEmulatorDiesWithTestBinary(t *testing.T) {
	if os.Getenv("OBJLEASE_HARNESS_CHILD") == "1" {
		_, p := emulator.StartFakeGCS(t)
		fmt.Printf("emulator-pid=%d\n", p.Pid())
		os.Stdout.Sync()
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestEmulatorDiesWithTestBinary$", "-test.count=1")
	cmd.Env = append(os.Environ(), "OBJLEASE_HARNESS_CHILD=1")
	out, _ := cmd.CombinedOutput()
	m := regexp.MustCompile(`emulator-pid=(\d+)`).FindSubmatch(out)
	if m == nil {
		if bytes.Contains(out, []byte("SKIP")) {
			t.Skipf("child skipped:\n%s", out)
		}
		t.Fatalf("child did not start an emulator:\n%s", out)
	}
	emu, _ := strconv.Atoi(string(m[1]))
	// The kernel kills the emulator asynchronously: wait for it, up to
	// shortly before the test binary's own -timeout.
	deadline, bounded := t.Deadline()
	for alive(emu) {
		if bounded && time.Until(deadline) < 5*time.Second {
			syscall.Kill(emu, syscall.SIGKILL)
			t.Fatalf("emulator (pid %d) still runs after the test binary that started it was killed", emu)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// parentPid is pid's parent process id, 0 if unknown.
func parentPid(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// Format: pid (comm) state ppid ...; comm may hold spaces.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// alive reports whether pid is a running (not zombie) process.
func alive(pid int) bool {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	// Format: pid (comm) state ...; comm may hold spaces, so split at ')'.
	rest := line[strings.LastIndexByte(line, ')')+1:]
	return !strings.HasPrefix(strings.TrimSpace(rest), "Z")
}
