package main

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/driver"
	"github.com/objlease/objlease/providers/file"
)

// slowEnv holds a duration: every request of the slow:// store answers
// that much late, the request done first (as a store whose replies come
// back late does: a request abandoned while it waits has landed). The
// scheme is registered only in an objlease started with it set (a test's
// child process).
const slowEnv = "OBJLEASE_TEST_SLOW"

type slowed struct {
	driver.Driver
	delay time.Duration
}

// late waits out the delay after the request was done, or until ctx
// ends.
func (s slowed) late(ctx context.Context) error {
	t := time.NewTimer(s.delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s slowed) Read(ctx context.Context, key string, maxBytes int64) (*driver.Reader, error) {
	r, err := s.Driver.Read(context.WithoutCancel(ctx), key, maxBytes)
	if lerr := s.late(ctx); lerr != nil {
		if r != nil {
			r.Body.Close()
		}
		return nil, lerr
	}
	return r, err
}

func (s slowed) Stat(ctx context.Context, key string) (*driver.Attrs, error) {
	a, err := s.Driver.Stat(context.WithoutCancel(ctx), key)
	if lerr := s.late(ctx); lerr != nil {
		return nil, lerr
	}
	return a, err
}

func (s slowed) Create(ctx context.Context, key string, data []byte, md map[string]string) (driver.WriteResult, error) {
	r, err := s.Driver.Create(context.WithoutCancel(ctx), key, data, md)
	if lerr := s.late(ctx); lerr != nil {
		return driver.WriteResult{}, lerr
	}
	return r, err
}

func (s slowed) Replace(ctx context.Context, key string, data []byte, md map[string]string, v string) (driver.WriteResult, error) {
	r, err := s.Driver.Replace(context.WithoutCancel(ctx), key, data, md, v)
	if lerr := s.late(ctx); lerr != nil {
		return driver.WriteResult{}, lerr
	}
	return r, err
}

func (s slowed) Delete(ctx context.Context, key, v string) error {
	err := s.Driver.Delete(context.WithoutCancel(ctx), key, v)
	if lerr := s.late(ctx); lerr != nil {
		return lerr
	}
	return err
}

func (s slowed) List(ctx context.Context, prefix, page string, n int) (driver.ListPage, error) {
	p, err := s.Driver.List(context.WithoutCancel(ctx), prefix, page, n)
	if lerr := s.late(ctx); lerr != nil {
		return driver.ListPage{}, lerr
	}
	return p, err
}

func init() {
	delay, err := time.ParseDuration(os.Getenv(slowEnv))
	if err != nil {
		return
	}
	// slow:///DIR/KEY: the file store in DIR, and KEY in it.
	_ = providers.Register("slow", func(_ context.Context, u *url.URL, _ providers.OpenOptions) (*providers.Bucket, string, error) {
		d, err := file.NewDriver(filepath.Dir(u.Path))
		if err != nil {
			return nil, "", err
		}
		return providers.NewBucket(slowed{d, delay}), filepath.Base(u.Path), nil
	})
}
