package providers_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/driver"
	"github.com/objlease/objlease/providers/mem"
)

// silent is a store that accepted the connection and never answers: every
// request waits for its context.
type silent struct{ driver.Driver }

func (silent) Properties() driver.Properties {
	return driver.Properties{Name: "silent", Where: `bucket "quiet"`}
}

func (silent) Read(ctx context.Context, _ string, _ int64) (*driver.Reader, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}
func (silent) Stat(ctx context.Context, _ string) (*driver.Attrs, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}
func (silent) Create(ctx context.Context, _ string, _ []byte, _ map[string]string) (driver.WriteResult, error) {
	<-ctx.Done()
	return driver.WriteResult{}, ctx.Err()
}
func (silent) Replace(ctx context.Context, _ string, _ []byte, _ map[string]string, _ string) (driver.WriteResult, error) {
	<-ctx.Done()
	return driver.WriteResult{}, ctx.Err()
}
func (silent) Delete(ctx context.Context, _ string, _ string) error {
	<-ctx.Done()
	return ctx.Err()
}
func (silent) List(ctx context.Context, _, _ string, _ int) (driver.ListPage, error) {
	<-ctx.Done()
	return driver.ListPage{}, ctx.Err()
}

// A request the store never answers ends at the request timeout: a read
// as unreachable, a write as an unknown outcome (it may have landed),
// each saying how long it waited; without a timeout only the caller's
// context ends it.
func TestRequestTimeout(t *testing.T) {
	b := providers.NewBucket(silent{mem.NewDriver()}).WithRequestTimeout(20 * time.Millisecond)
	ctx := context.Background()
	check := func(op string, err error, write bool) {
		t.Helper()
		want, not := providers.ErrUnreachable, providers.ErrUnknownOutcome
		if write {
			want, not = not, want
		}
		if !errors.Is(err, want) || errors.Is(err, not) || !strings.Contains(err.Error(), `bucket "quiet": no answer from the store within 20ms`) {
			t.Errorf("%s on a silent store: %v, want %v naming the bucket and saying how long it waited", op, err, want)
		}
		// Only the caller's own deadline may look like one.
		if errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: %v matches context.DeadlineExceeded", op, err)
		}
		var te *providers.TimeoutError
		if !errors.As(err, &te) || !te.Timeout() {
			t.Errorf("%s: %v has no TimeoutError", op, err)
		}
		var pe *providers.Error
		if !errors.As(err, &pe) || pe.Op != op {
			t.Errorf("%s: %v does not name the operation", op, err)
		}
	}
	_, err := b.Get(ctx, "k", 0)
	check("get", err, false)
	_, err = b.Stat(ctx, "k")
	check("stat", err, false)
	_, err = b.List(ctx, "", "", 10)
	check("list", err, false)
	_, err = b.Create(ctx, "k", []byte("x"), nil)
	check("create", err, true)
	_, err = b.Replace(ctx, "k", []byte("x"), nil, "v1")
	check("replace", err, true)
	check("delete", b.Delete(ctx, "k", "v1"), true)

	// The caller's own deadline, shorter than the request's, keeps its
	// cause.
	why := errors.New("validity ended")
	cctx, cancel := context.WithTimeoutCause(ctx, 5*time.Millisecond, why)
	defer cancel()
	_, err = b.WithRequestTimeout(time.Hour).Get(cctx, "k", 0)
	if errors.Is(err, providers.ErrUnreachable) || strings.Contains(err.Error(), "no answer") {
		t.Errorf("get cut by the caller's deadline: %v, want no request timeout", err)
	}
}
