package integration

// Safety properties of fencing and of the self-test on S3 stores, with
// real servers: versitygw (honours preconditions), s3rver (ignores them).

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	s3sdk "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/objlease/objlease/integration/emulator"
	"github.com/objlease/objlease/internal/safeguards"
	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/objlease/fence"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/s3"
)

// pausedWriter runs pause once, just before the first conditional write:
// the writer has checked the object and is paused before writing.
type pausedWriter struct {
	providers.Store
	once  sync.Once
	pause func()
}

func (p *pausedWriter) Replace(ctx context.Context, key string, data []byte, md map[string]string, v string) (providers.WriteResult, error) {
	p.once.Do(p.pause)
	return p.Store.Replace(ctx, key, data, md, v)
}

func fenceToken(t *testing.T, s providers.Store, key string) (token uint64, tombstone bool, version string) {
	t.Helper()
	a, err := s.Stat(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	token, _ = strconv.ParseUint(a.Metadata[fence.TokenKey], 10, 64)
	return token, a.Metadata[fence.TombstoneKey] == "true", a.Version
}

// TestS3FenceTombstoneABA: X is a tombstone of token 5; A (token 6) reads X
// and is paused; B (token 7) deletes X. Empty tombstones have the same ETag
// (the MD5 of nothing), so A's If-Match would match B's tombstone and X's
// token would go back from 7 to 6. Unique tombstones make A's write fail
// and A is then refused as stale.
func TestS3FenceTombstoneABA(t *testing.T) {
	target := newS3Target(t)
	store := target.open(t)
	target.cleanup(t, store)
	ctx := t.Context()
	opts := fence.Options{UniquePayloads: true}
	run := func(t *testing.T, key string, late func(s providers.Store, key string) error) (token uint64, tombstone bool, repeated bool, err error) {
		if _, err := fence.Put(ctx, store, key, 5, []byte("token 5's payload"), opts); err != nil {
			t.Fatal(err)
		}
		if err := fence.Delete(ctx, store, key, 5, opts); err != nil {
			t.Fatal(err)
		}
		_, _, before := fenceToken(t, store, key)
		var after string
		a := &pausedWriter{Store: store, pause: func() {
			if err := fence.Delete(ctx, store, key, 7, opts); err != nil {
				t.Errorf("B's delete: %v", err)
			}
			_, _, after = fenceToken(t, store, key)
		}}
		err = late(a, key)
		token, tombstone, _ = fenceToken(t, store, key)
		return token, tombstone, before == after, err
	}
	lates := map[string]func(s providers.Store, key string) error{
		"stale delete": func(s providers.Store, key string) error { return fence.Delete(ctx, s, key, 6, opts) },
		"stale put": func(s providers.Store, key string) error {
			_, err := fence.Put(ctx, s, key, 6, []byte("A's unique payload, token 6"), opts)
			return err
		},
	}
	for name, late := range lates {
		t.Run(name, func(t *testing.T) {
			token, tombstone, repeated, err := run(t, target.prefix+strings.ReplaceAll(t.Name(), "/", "-"), late)
			if repeated {
				t.Errorf("two tombstones had the same ETag")
			}
			if !errors.Is(err, fence.ErrStale) || token != 7 || !tombstone {
				t.Fatalf("A's late write: %v, token %d, tombstone %v; want ErrStale and B's tombstone of token 7", err, token, tombstone)
			}
		})
		if target.real() {
			continue
		}
		// The repeat itself, on this server: empty tombstones.
		t.Run(name+"/empty tombstones", func(t *testing.T) {
			safeguards.UniqueTombstones.Store(false)
			defer safeguards.UniqueTombstones.Store(true)
			token, _, repeated, err := run(t, target.prefix+strings.ReplaceAll(t.Name(), "/", "-"), late)
			if !repeated || err != nil || token != 6 {
				t.Fatalf("empty tombstones: ETag repeated %v, A's write %v, token %d; want the repeat and token 6", repeated, err, token)
			}
		})
	}
}

// TestS3FenceRefusesLeaseRecord: fenced writes leave a lease record alone.
func TestS3FenceRefusesLeaseRecord(t *testing.T) {
	target := newS3Target(t)
	store := target.open(t)
	target.cleanup(t, store)
	ctx := t.Context()
	key := target.prefix + "lease"
	c, err := objlease.New(store, key, objlease.Options{TTL: time.Minute, Holder: "h", Clock: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryAcquire(ctx); err != nil {
		t.Fatal(err)
	}
	opts := fence.Options{UniquePayloads: true}
	if _, err := fence.Put(ctx, store, key, 1, []byte("x"), opts); !errors.Is(err, fence.ErrLeaseRecord) {
		t.Errorf("put on a lease: %v, want ErrLeaseRecord", err)
	}
	if err := fence.Delete(ctx, store, key, 1, opts); !errors.Is(err, fence.ErrLeaseRecord) {
		t.Errorf("delete on a lease: %v, want ErrLeaseRecord", err)
	}
	if st, err := c.Inspect(ctx); err != nil || st.Record.Token != 1 || st.Record.State != objlease.StateHeld {
		t.Fatalf("lease after refused writes: %+v %v", st, err)
	}
}

// deleteLog records each DELETE's If-Match and status.
type deleteLog struct {
	mu   sync.Mutex
	seen []string
}

func (d *deleteLog) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if req.Method == http.MethodDelete && err == nil {
		d.mu.Lock()
		d.seen = append(d.seen, req.Header.Get("If-Match")+" "+strconv.Itoa(resp.StatusCode))
		d.mu.Unlock()
	}
	return resp, err
}

// TestS3ProbeStaleDeleteReachesServer: the probe's stale delete is answered
// by the server (412), not by a check in the client.
func TestS3ProbeStaleDeleteReachesServer(t *testing.T) {
	target := newS3Target(t)
	var log deleteLog
	store := target.store(t, &log)
	if _, err := objlease.Probe(t.Context(), store, target.prefix); err != nil {
		t.Fatal(err)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.seen) == 0 || !strings.HasSuffix(log.seen[0], " 412") {
		t.Fatalf("DELETE requests %q: want the stale delete sent and refused with 412", log.seen)
	}
}

// TestS3rverProbeUnsafe: on a server that ignores preconditions, the probe
// fails every check, the stale delete included.
func TestS3rverProbeUnsafe(t *testing.T) {
	e := emulator.S3rver(t)
	client := s3sdk.New(s3sdk.Options{
		Region:       e.Region,
		BaseEndpoint: aws.String(e.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(e.AccessKey, e.SecretKey, ""),
	})
	_, err := objlease.Probe(t.Context(), s3.New(client, e.Bucket), emulator.Prefix(t))
	if !errors.Is(err, objlease.ErrStoreUnsafe) {
		t.Fatalf("s3rver: %v, want ErrStoreUnsafe", err)
	}
	for _, check := range []string{"If-None-Match: * ignored", "If-Match ignored", "delete with a stale version"} {
		if !strings.Contains(err.Error(), check) {
			t.Errorf("%q does not name the check %q", err, check)
		}
	}
}
