package main

import (
	"context"
	"net/url"
	"os"
	"path/filepath"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/driver"
	"github.com/objlease/objlease/providers/file"
)

// stallEnv names a file whose existence makes the stall:// store stop
// answering. The scheme is registered only in an objlease started with it
// set (a test's child process), so that no other run knows it.
const stallEnv = "OBJLEASE_TEST_STALL"

// stalled is a file store that, while the file stallEnv names exists,
// answers no request: each one hangs until its context ends, as a request
// to a store that accepted the connection and never answers does.
type stalled struct {
	driver.Driver
	marker string
}

func (s stalled) hang(ctx context.Context) error {
	if _, err := os.Stat(s.marker); err != nil {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func (s stalled) Read(ctx context.Context, key string, maxBytes int64) (*driver.Reader, error) {
	if err := s.hang(ctx); err != nil {
		return nil, err
	}
	return s.Driver.Read(ctx, key, maxBytes)
}

func (s stalled) Stat(ctx context.Context, key string) (*driver.Attrs, error) {
	if err := s.hang(ctx); err != nil {
		return nil, err
	}
	return s.Driver.Stat(ctx, key)
}

func (s stalled) Create(ctx context.Context, key string, data []byte, md map[string]string) (driver.WriteResult, error) {
	if err := s.hang(ctx); err != nil {
		return driver.WriteResult{}, err
	}
	return s.Driver.Create(ctx, key, data, md)
}

func (s stalled) Replace(ctx context.Context, key string, data []byte, md map[string]string, v string) (driver.WriteResult, error) {
	if err := s.hang(ctx); err != nil {
		return driver.WriteResult{}, err
	}
	return s.Driver.Replace(ctx, key, data, md, v)
}

func (s stalled) Delete(ctx context.Context, key, v string) error {
	if err := s.hang(ctx); err != nil {
		return err
	}
	return s.Driver.Delete(ctx, key, v)
}

func (s stalled) List(ctx context.Context, prefix, page string, n int) (driver.ListPage, error) {
	if err := s.hang(ctx); err != nil {
		return driver.ListPage{}, err
	}
	return s.Driver.List(ctx, prefix, page, n)
}

func init() {
	marker := os.Getenv(stallEnv)
	if marker == "" {
		return
	}
	// stall:///DIR/KEY: the file store in DIR, and KEY in it.
	_ = providers.Register("stall", func(_ context.Context, u *url.URL, _ providers.OpenOptions) (*providers.Bucket, string, error) {
		d, err := file.NewDriver(filepath.Dir(u.Path))
		if err != nil {
			return nil, "", err
		}
		return providers.NewBucket(stalled{d, marker}), filepath.Base(u.Path), nil
	})
}
