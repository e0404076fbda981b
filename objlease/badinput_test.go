package objlease_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/file"
	"github.com/objlease/objlease/providers/mem"
)

// The bad-input table of docs/reliability.md: every row is an input the
// library must refuse with an error naming the object, leaving what is
// stored as it was.

const badKey = "jobs/bad-input"

var badEpoch = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

func badClient(t *testing.T, store providers.Store, key, holder string) *objlease.Client {
	t.Helper()
	c, err := newOn(store, key, objlease.SessionOptions{Clock: clock.NewFake(badEpoch)}, objlease.Options{TTL: 10 * time.Second, Holder: holder})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// readBounds records the bound of every Get, to show that reads of a
// lease object are bounded.
type readBounds struct {
	providers.Store
	mu     sync.Mutex
	bounds []int64
}

func (r *readBounds) Get(ctx context.Context, key string, max int64) (*providers.Object, error) {
	r.mu.Lock()
	r.bounds = append(r.bounds, max)
	r.mu.Unlock()
	return r.Store.Get(ctx, key, max)
}

func TestBadInputRecords(t *testing.T) {
	valid := `{"objlease":1,"name":"jobs/bad-input","token":7,"holder":"x","nonce":"n","state":"held","ttl_ms":10000,"written_at":"2026-01-01T00:00:00Z","renewals":0}`
	for _, tc := range []struct {
		name, body string
		want       error
		reason     string
	}{
		{"malformed JSON", `{"objlease":1,"token":7,`, objlease.ErrBadRecord, "not JSON"},
		{"not an objlease record", `{"apiVersion":"v1","kind":"ConfigMap","token":3}`, objlease.ErrBadRecord, `no "objlease" schema field`},
		{"plain text", "leader=host-a\n", objlease.ErrBadRecord, "not JSON"},
		{"newer schema version", `{"objlease":2,"token":9,"lease":{"fancy":true}}`, objlease.ErrNewerSchema, "schema 2, this objlease reads up to 1"},
		{"schema version 0", strings.Replace(valid, `"objlease":1`, `"objlease":0`, 1), objlease.ErrBadRecord, "schema 0 is not a valid version"},
		{"oversized object", `{"objlease":1,"pad":"` + strings.Repeat("x", objlease.MaxRecordSize) + `"}`, objlease.ErrBadRecord, fmt.Sprintf("larger than %d bytes", objlease.MaxRecordSize)},
		{"oversized data field", strings.Replace(valid, `"renewals":0`, `"renewals":0,"data":"`+strings.Repeat("QUFB", objlease.MaxDataSize/3+1)+`"`, 1), objlease.ErrBadRecord, "data is"},
		{"negative token", strings.Replace(valid, `"token":7`, `"token":-7`, 1), objlease.ErrBadRecord, "invalid record"},
		{"zero TTL", strings.Replace(valid, `"ttl_ms":10000`, `"ttl_ms":0`, 1), objlease.ErrBadRecord, "ttl_ms 0 is not positive"},
		{"two records back to back", valid + valid, objlease.ErrBadRecord, "not JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			m := mem.New()
			before, err := m.Create(ctx, badKey, []byte(tc.body), nil)
			if err != nil {
				t.Fatal(err)
			}
			rb := &readBounds{Store: m}
			c := badClient(t, rb, badKey, "a")
			check := func(op string, err error) {
				t.Helper()
				var re *objlease.Error
				if !errors.Is(err, tc.want) || !errors.As(err, &re) || re.Key != badKey {
					t.Fatalf("%s: %v, want %v as an *Error naming %q", op, err, tc.want, badKey)
				}
				if msg := err.Error(); !strings.Contains(msg, tc.reason) || !strings.Contains(msg, `"`+badKey+`"`) {
					t.Fatalf("%s: message %q does not say %q about %q", op, msg, tc.reason, badKey)
				}
			}
			_, err = c.TryAcquire(ctx)
			check("TryAcquire", err)
			_, err = c.Acquire(ctx) // the error is permanent: Acquire must not wait
			check("Acquire", err)
			_, err = c.Inspect(ctx)
			check("Inspect", err)
			_, err = c.Break(ctx)
			check("Break", err)
			check("Release", c.Release(ctx))

			obj, err := m.Get(ctx, badKey, 0)
			if err != nil || obj.Version != before.Version || !bytes.Equal(obj.Data, []byte(tc.body)) {
				t.Fatalf("the object was changed: version %s (was %s), err %v", obj.Version, before.Version, err)
			}
			for _, b := range rb.bounds {
				if b != objlease.MaxRecordSize {
					t.Fatalf("a read of the lease object was bounded by %d, want %d", b, objlease.MaxRecordSize)
				}
			}
		})
	}
}

// A record's token going backwards can only be tampering: objlease never
// writes a lower token. The holder notices that its record changed (its
// renewal is refused and the lease is lost), and a client that has seen the
// higher token refuses the record, naming the key, and leaves it alone;
// forced, it continues above the highest token it has seen, so no token is
// reissued.
func TestBadInputTokenWentBack(t *testing.T) {
	ctx := context.Background()
	m := mem.New()
	c := badClient(t, m, badKey, "a")
	var l *objlease.Lease
	for range 5 { // tokens 1..5
		var err error
		if l, err = c.TryAcquire(ctx); err != nil {
			t.Fatal(err)
		}
		if l.Token() < 5 {
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if l.Token() != 5 {
		t.Fatalf("token %d, want 5", l.Token())
	}

	// Someone rewrites the record with token 2, released.
	a, err := m.Stat(ctx, badKey)
	if err != nil {
		t.Fatal(err)
	}
	tampered := `{"objlease":1,"name":"jobs/bad-input","token":2,"nonce":"x","state":"released","ttl_ms":10000,"written_at":"2026-01-01T00:00:00Z","renewals":0}`
	if _, err := m.Replace(ctx, badKey, []byte(tampered), nil, a.Version); err != nil {
		t.Fatal(err)
	}

	if err := l.Renew(ctx); !errors.Is(err, objlease.ErrLeaseLost) || !strings.Contains(err.Error(), badKey) {
		t.Fatalf("renewal over a tampered record: %v, want ErrLeaseLost naming %q", err, badKey)
	}
	_, err = c.TryAcquire(ctx)
	var re *objlease.Error
	if !errors.As(err, &re) || !errors.Is(err, objlease.ErrBadRecord) || re.Key != badKey || !strings.Contains(err.Error(), "token went back from 5 to 2") {
		t.Fatalf("acquire over a record whose token went back: %v, want an *Error naming %q", err, badKey)
	}
	if obj, _ := m.Get(ctx, badKey, 0); string(obj.Data) != tampered {
		t.Fatal("the tampered record was overwritten without force")
	}
	c2, err := objlease.New(m, badKey, objlease.Options{TTL: 10 * time.Second, Holder: "a", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	// A forcing client that has never seen token 5 continues from the
	// record's token; the fence still protects the resource.
	l2, err := c2.TryAcquire(ctx)
	if err != nil || l2.Token() != 3 {
		t.Fatalf("forced acquire: token %v, %v", l2, err)
	}
	l2.Release(ctx)
}

// A record whose ttl_ms would overflow a time.Duration (or exceeds a year)
// is refused: objlease never writes one, and a negative TTL would make a
// held lease look expired.
func TestBadInputTTLOverflow(t *testing.T) {
	ctx := context.Background()
	m := mem.New()
	held := `{"objlease":1,"name":"jobs/bad-input","token":4,"holder":"x","nonce":"n","state":"held","ttl_ms":9223372036854775807,"written_at":"2026-01-01T00:00:00Z","renewals":0}`
	if _, err := m.Create(ctx, badKey, []byte(held), nil); err != nil {
		t.Fatal(err)
	}
	_, err := badClient(t, m, badKey, "a").TryAcquire(ctx)
	var re *objlease.Error
	if !errors.As(err, &re) || re.Key != badKey || !strings.Contains(err.Error(), "more than the longest TTL") {
		t.Fatalf("%v, want an *Error naming %q", err, badKey)
	}
}

// The file store refuses keys that are not plain relative paths, before
// touching the disk.
func TestBadInputFileKeys(t *testing.T) {
	ctx := context.Background()
	for _, key := range []string{"../escape", "jobs/../../escape", "jobs//nightly", "jobs/./nightly", "/jobs/nightly", "jobs/nightly/", ".objlease-locks/x", "jobs/\x00"} {
		t.Run(fmt.Sprintf("%q", key), func(t *testing.T) {
			root := t.TempDir()
			s, err := file.New(root)
			if err != nil {
				t.Fatal(err)
			}
			_, err = badClient(t, s, key, "a").TryAcquire(ctx)
			var pe *providers.Error
			if !errors.Is(err, providers.ErrInvalidKey) || !errors.As(err, &pe) || pe.Key != key || !strings.Contains(err.Error(), fmt.Sprintf("%q", key)) {
				t.Fatalf("TryAcquire: %v, want ErrInvalidKey naming %q", err, key)
			}
			if files := filesUnder(t, filepath.Dir(root)); len(files) > 0 {
				t.Fatalf("files written for a refused key: %v", files)
			}
		})
	}
	// A key under which another key is stored is a directory, not an object.
	root := t.TempDir()
	s, err := file.New(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := badClient(t, s, "jobs/nightly/a", "a").TryAcquire(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = badClient(t, s, "jobs/nightly", "b").TryAcquire(ctx)
	if !errors.Is(err, providers.ErrInvalidKey) || !strings.Contains(err.Error(), `"jobs/nightly"`) {
		t.Fatalf("lease at a key that is a directory: %v, want ErrInvalidKey naming it", err)
	}
	// An empty key is refused by New.
	if _, err := objlease.New(s, "", objlease.Options{}); !errors.Is(err, objlease.ErrInvalidOptions) {
		t.Fatalf("empty key: %v, want ErrInvalidOptions", err)
	}
}

// filesUnder lists the regular files under dir (lock files included).
func filesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestBadInputMissingRoot(t *testing.T) {
	ctx := context.Background()
	missing := filepath.Join(t.TempDir(), "no-such-dir")
	_, err := file.New(missing)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("file.New of a missing root: %v, want fs.ErrNotExist naming %s", err, missing)
	}

	// A root that cannot be created: a file stands in its path.
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = providers.Open(ctx, "file://"+blocker+"/leases/nightly")
	if err == nil || !strings.Contains(err.Error(), blocker) {
		t.Fatalf("Open under a file: %v, want an error naming %s", err, blocker)
	}

	// A root removed after the store was opened: the next write recreates
	// it (the lock directory is made with MkdirAll), and the lease starts
	// again at token 1. Gap: nothing reports that the root vanished.
	root := filepath.Join(t.TempDir(), "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := file.New(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(root); err != nil {
		t.Fatal(err)
	}
	l, err := badClient(t, s, "nightly", "a").TryAcquire(ctx)
	if err != nil {
		t.Fatalf("today the root is recreated silently (this test documents the gap: update it if the store refuses): %v", err)
	}
	defer l.Release(ctx)
	if l.Token() != 1 {
		t.Fatalf("token %d, want 1", l.Token())
	}
}

// conditionsUnsupported refuses every conditional write, as S3-compatible
// servers without conditional writes do (501 NotImplemented).
type conditionsUnsupported struct{ *providers.Bucket }

func (s conditionsUnsupported) refuse(op, key string) error {
	return providers.Wrap(op, key, fmt.Errorf("%w: store does not implement conditional writes", errors.ErrUnsupported), errors.New("501 NotImplemented"))
}

func (s conditionsUnsupported) Create(_ context.Context, key string, _ []byte, _ map[string]string) (providers.WriteResult, error) {
	return providers.WriteResult{}, s.refuse("create", key)
}

func (s conditionsUnsupported) Replace(_ context.Context, key string, _ []byte, _ map[string]string, _ string) (providers.WriteResult, error) {
	return providers.WriteResult{}, s.refuse("replace", key)
}

func (s conditionsUnsupported) Delete(_ context.Context, key, _ string) error {
	return s.refuse("delete", key)
}

func TestBadInputUnsafeStores(t *testing.T) {
	ctx := context.Background()
	t.Run("refuses conditional writes", func(t *testing.T) {
		m := mem.New()
		s := conditionsUnsupported{m}
		_, err := badClient(t, s, badKey, "a").TryAcquire(ctx)
		if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), badKey) {
			t.Fatalf("TryAcquire: %v, want errors.ErrUnsupported naming %q", err, badKey)
		}
		if page, _ := m.List(ctx, "", "", 100); len(page.Objects) != 0 {
			t.Fatalf("objects written: %+v", page.Objects)
		}
	})
}
