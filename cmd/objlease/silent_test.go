//go:build unix

package main

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// silentEndpoint accepts connections and never answers, as a hung load
// balancer or a stopped process behind an open port does. accepted is
// closed once it has a connection.
func silentEndpoint(t *testing.T) (addr string, accepted <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	first := make(chan struct{})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if conns = append(conns, c); len(conns) == 1 {
				close(first)
			}
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String(), first
}

// silentEnv is the environment of a command pointed at a silent endpoint:
// test credentials, so that nothing looks for real ones.
func silentEnv(addr string) []string {
	return append(os.Environ(),
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_REGION=us-east-1",
		"AWS_EC2_METADATA_DISABLED=true",
		"STORAGE_EMULATOR_HOST="+addr,
		"AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;BlobEndpoint=http://"+addr+"/devstoreaccount1;")
}

// Every command against an endpoint that never answers ends with one
// line saying how long it waited, with the exit code of an unreachable
// store (69), once --request-timeout has passed for each request.
func TestSilentEndpointTimesOut(t *testing.T) {
	addr, _ := silentEndpoint(t)
	s3 := "s3://bkt/%s?endpoint=http://" + addr + "&path_style=true"
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"inspect s3", []string{"inspect", strings.Replace(s3, "%s", "k", 1)}},
		{"list s3", []string{"list", strings.Replace(s3, "%s", "p/", 1)}},
		{"inspect gs", []string{"inspect", "gs://bkt/k"}},
		{"inspect azblob", []string{"inspect", "azblob://cont/k"}},
		{"acquire -n s3", []string{"acquire", "-n", "--ttl", "1s", "--holder", "h", strings.Replace(s3, "%s", "k", 1)}},
		{"doctor s3", []string{"doctor", strings.Replace(s3, "%s", "d/", 1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(objleaseBin(t), append([]string{tc.args[0], "--request-timeout", "300ms"}, tc.args[1:]...)...)
			cmd.Env = silentEnv(addr)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			done := make(chan error, 1)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { done <- cmd.Wait() }()
			var err error
			select {
			case err = <-done:
			case <-time.After(2 * time.Minute):
				cmd.Process.Kill()
				t.Fatalf("%v still silent after 2 minutes; stderr:\n%s", tc.args, &stderr)
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 69 {
				t.Errorf("%v: %v, want exit 69; stderr:\n%s", tc.args, err, &stderr)
			}
			if !strings.Contains(stderr.String(), "no answer from the store within 300ms") {
				t.Errorf("%v: stderr does not say how long it waited:\n%s", tc.args, &stderr)
			}
		})
	}
}

// Ctrl-C ends a command waiting on a silent store at once: exit 130 and
// one line, not the SDK's words for a cancelled request.
func TestInterruptWhileStoreIsSilent(t *testing.T) {
	addr, accepted := silentEndpoint(t)
	cmd := exec.Command(objleaseBin(t), "inspect", "--request-timeout", "1h", "s3://bkt/k?endpoint=http://"+addr+"&path_style=true")
	cmd.Env = silentEnv(addr)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until the request is out: the endpoint has a connection. (A
	// fixed sleep here sent the signal before the command had set up its
	// handling on a loaded machine: it died of SIGINT, exit -1.)
	select {
	case <-accepted:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		t.Fatalf("no request reached the endpoint within a minute; stderr:\n%s", &stderr)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	code := waitExit(t, cmd)
	if code != 130 {
		t.Errorf("exit %d, want 130; stderr:\n%s", code, &stderr)
	}
	if lines := strings.Split(strings.TrimSpace(stderr.String()), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "interrupted") {
		t.Errorf("stderr is not one line saying it was interrupted:\n%s", &stderr)
	}
}
