package driver_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/objlease/objlease/providers/driver"
)

func TestConnectFailed(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{&url.Error{Op: "Put", URL: "http://127.0.0.1:1/b/k", Err: refused}, true},
		{&url.Error{Op: "Get", URL: "http://nohost.invalid/", Err: &net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "nohost.invalid"}}}, true},
		{&net.DNSError{Err: "no such host", Name: "x"}, true},
		{&url.Error{Op: "Put", URL: "http://127.0.0.1:1/b/k", Err: reset}, false},
		{context.DeadlineExceeded, false},
		{io.ErrUnexpectedEOF, false},
	} {
		if got := driver.ConnectFailed(tt.err); got != tt.want {
			t.Errorf("ConnectFailed(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// A body cut short while it is sent fails its reads with
// io.ErrUnexpectedEOF, never a clean end: a shorter object is not written.
func TestExactBody(t *testing.T) {
	full := strings.NewReader("0123456789")
	if b, err := io.ReadAll(driver.Exact(io.NewSectionReader(full, 2, 8))); err != nil || string(b) != "23456789" {
		t.Errorf("whole body: %q, %v", b, err)
	}
	short := strings.NewReader("01234") // the file shrank to 5 bytes
	b, err := io.ReadAll(driver.Exact(io.NewSectionReader(short, 0, 10)))
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("body cut short: %q, %v, want io.ErrUnexpectedEOF", b, err)
	}
}
