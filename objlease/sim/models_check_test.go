package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/providertest"
)

// Every model keeps the store contract.
func TestModelsConform(t *testing.T) {
	for _, kind := range []string{"mem", "s3", "gcs", "azure"} {
		t.Run(kind, func(t *testing.T) {
			m := newModel(kind, 1, &auditLog{})
			m.throttle = false // the suite writes one object many times a second
			absent := newModel(kind, 2, &auditLog{})
			providertest.Run(t, providertest.Config{Bucket: providers.NewBucket(m), Racers: 5, Rounds: 5, MissingBucket: providers.NewBucket(absent), CreatesBuckets: true, Unordered: m.express})
		})
	}
	t.Run("s3express", func(t *testing.T) {
		m := newModel("s3", 3, &auditLog{})
		if !m.express {
			t.Fatal("an s3 model of an odd seed is not a directory bucket")
		}
		if even := newModel("s3", 4, &auditLog{}); even.express {
			t.Fatal("an s3 model of an even seed is a directory bucket")
		}
		providertest.Run(t, providertest.Config{Bucket: providers.NewBucket(m), Racers: 5, Rounds: 5, MissingBucket: providers.NewBucket(newModel("s3", 5, &auditLog{})), CreatesBuckets: true, Unordered: true})
	})
	t.Run("file", func(t *testing.T) {
		roots, err := fileRoots(t.TempDir(), newWallClock(rand.New(rand.NewPCG(1, 2)), time.Now(), time.Minute), &auditLog{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		absent, err := fileRoots(t.TempDir(), newWallClock(rand.New(rand.NewPCG(3, 4)), time.Now(), time.Minute), &auditLog{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		providertest.Run(t, providertest.Config{Bucket: providers.NewBucket(roots[0]), Racers: 5, Rounds: 5, MissingBucket: providers.NewBucket(absent[0]), CreatesBuckets: true})
	})
}

// The S3 model repeats a version when equal bytes are written again: the
// ABA that in-place fencing must survive.
func TestModelS3RepeatsVersions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := newModel("s3", 1, &auditLog{})
		first, err := m.Create(ctx, "k", nil, map[string]string{"objlease-token": "5"})
		if err != nil {
			t.Fatal(err)
		}
		mid, err := m.Replace(ctx, "k", []byte("data"), nil, first.Version)
		if err != nil {
			t.Fatal(err)
		}
		again, err := m.Replace(ctx, "k", nil, map[string]string{"objlease-token": "6"}, mid.Version)
		if err != nil {
			t.Fatal(err)
		}
		if again.Version != first.Version || mid.Version == first.Version {
			t.Fatalf("versions %s, %s, %s: want the first and last equal (MD5 of empty bytes)", first.Version, mid.Version, again.Version)
		}
		// A writer that checked the first version now succeeds against the third.
		if _, err := m.Replace(ctx, "k", []byte("stale"), nil, first.Version); err != nil {
			t.Fatalf("replace against a repeated version: %v", err)
		}
	})
}

// The S3 model refuses a conditional write racing another with 409.
func TestModelS3Conflict(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := newModel("s3", 1, &auditLog{})
		res, err := m.Create(ctx, "k", []byte("a"), nil)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * time.Millisecond / 10)
				_, errs[i] = m.Replace(ctx, "k", []byte{byte('b' + i)}, nil, res.Version)
			})
		}
		wg.Wait()
		if errs[0] != nil || !errors.Is(errs[1], providers.ErrConflict) {
			t.Fatalf("racing conditional writes: %v, %v; want success, ErrConflict", errs[0], errs[1])
		}
		a, _ := m.Stat(ctx, "k")
		if a.LastModified.Nanosecond() != 0 || a.StoreTime.Nanosecond() != 0 {
			t.Fatalf("Last-Modified %v, Date %v: want whole seconds", a.LastModified, a.StoreTime)
		}
	})
}

// The GCS model throttles writes to one object closer than a second apart.
func TestModelGCSThrottles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := newModel("gcs", 1, &auditLog{})
		res, err := m.Create(ctx, "k", []byte("a"), nil)
		if err != nil {
			t.Fatal(err)
		}
		throttled, gone := 0, 0
		for range 20 {
			time.Sleep(100 * time.Millisecond)
			r, err := m.Replace(ctx, "k", []byte("b"), nil, res.Version)
			switch {
			case errors.Is(err, providers.ErrThrottled):
				throttled++
				if strings.Contains(err.Error(), "410 Gone") {
					gone++
				}
			case err != nil:
				t.Fatal(err)
			default:
				res = r
			}
		}
		if throttled == 0 || gone == 0 || gone == throttled {
			t.Fatalf("20 writes 100 ms apart: %d throttled, %d of them with 410; want some with 429 and some with 410", throttled, gone)
		}
		for range 10 {
			time.Sleep(time.Second)
			if res, err = m.Replace(ctx, "k", []byte("c"), nil, res.Version); err != nil {
				t.Fatalf("a write a second after the last: %v", err)
			}
		}
	})
}

// The Azure model answers a create over an existing blob as the azblob
// store maps Azure's 409 BlobAlreadyExists: ErrPrecondition.
func TestModelAzureCreateExisting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := newModel("azure", 1, &auditLog{})
		a, err := m.Create(ctx, "k", []byte("x"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Create(ctx, "k", []byte("x"), nil); !errors.Is(err, providers.ErrPrecondition) {
			t.Fatalf("create over an existing blob: %v, want ErrPrecondition", err)
		}
		b, err := m.Replace(ctx, "k", []byte("x"), nil, a.Version)
		if err != nil || b.Version == a.Version {
			t.Fatalf("rewriting equal bytes: version %s after %s (%v); Azure ETags change on every write", b.Version, a.Version, err)
		}
	})
}

// The two roots of the file model reach the same files, and its wall
// clock steps: timestamps it reports can go back, or jump ahead.
func TestModelFileRootsAndWallClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		wall := newWallClock(rand.New(rand.NewPCG(1, 2)), time.Now(), 30*time.Second)
		roots, err := fileRoots(t.TempDir(), wall, &auditLog{}, rand.New(rand.NewPCG(3, 4)))
		if err != nil {
			t.Fatal(err)
		}
		res, err := roots[0].Create(ctx, "leases/L0", []byte("a"), nil)
		if err != nil {
			t.Fatal(err)
		}
		a, err := roots[1].Stat(ctx, "leases/L0")
		if err != nil || a.Version != res.Version {
			t.Fatalf("the other root sees %v, %v; want version %s", a, err, res.Version)
		}
		if _, err := roots[1].Create(ctx, "leases/L0", []byte("b"), nil); !errors.Is(err, providers.ErrPrecondition) {
			t.Fatalf("create at the other root: %v, want ErrPrecondition", err)
		}
		stepped := false
		prev := wall.Now()
		for range 100 {
			time.Sleep(10 * time.Second)
			now := wall.Now()
			if d := now.Sub(prev); d < 9*time.Second || d > 11*time.Second {
				stepped = true
			}
			prev = now
		}
		if !stepped {
			t.Fatal("the wall clock never stepped in 1000 s")
		}
	})
}

// The s3 model of a directory bucket (S3 Express One Zone) lists every key
// once, page by page, out of lexical order; If-Match on a missing key is
// 404 NoSuchKey, ErrPrecondition.
func TestModelS3Express(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := newModel("s3", 1, &auditLog{})
		var want []string
		for i := range 12 {
			k := fmt.Sprintf("leases/L%02d", i)
			want = append(want, k)
			if _, err := m.Create(ctx, k, []byte("x"), nil); err != nil {
				t.Fatal(err)
			}
		}
		var got []string
		for token := ""; ; {
			p, err := m.List(ctx, "leases/", token, 5)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range p.Objects {
				got = append(got, a.Key)
			}
			if token = p.NextToken; token == "" {
				break
			}
		}
		if slices.IsSorted(got) {
			t.Fatalf("listed %v: in lexical order", got)
		}
		if !slices.Equal(slices.Sorted(slices.Values(got)), want) {
			t.Fatalf("listed %v, want each of %v once", got, want)
		}
		_, err := m.Replace(ctx, "leases/gone", []byte("x"), nil, "0123")
		if !errors.Is(err, providers.ErrPrecondition) || !strings.Contains(err.Error(), "404 NoSuchKey") {
			t.Fatalf("replace of a missing key: %v, want ErrPrecondition from 404 NoSuchKey", err)
		}
	})
}
