package driver_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
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
