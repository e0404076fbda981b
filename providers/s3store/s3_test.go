package s3store

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	s3sdk "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/objlease/objlease/providers"
)

// TestWritesAreConditional checks the headers each write sends and what it
// makes of the reply.
func TestWritesAreConditional(t *testing.T) {
	date := time.Date(2026, 11, 29, 10, 0, 1, 0, time.UTC)
	s, f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.Method == http.MethodHead {
			headOK(w)
			return
		}
		awsHeaders(w)
		w.Header().Set("Date", date.Format(http.TimeFormat))
		if r.Method == http.MethodPut {
			w.Header().Set("ETag", `"9b2cf535f27731c974343645a3985328"`)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	ctx := t.Context()

	res, err := s.Create(ctx, "a/b", []byte("data"), map[string]string{"owner": "alice"})
	if err != nil {
		t.Fatal(err)
	}
	put := f.lastRequest(http.MethodPut)
	if got := put.Header.Get("If-None-Match"); got != "*" {
		t.Errorf("create sent If-None-Match %q, want *", got)
	}
	if got := put.Header.Get("If-Match"); got != "" {
		t.Errorf("create sent If-Match %q", got)
	}
	if got := put.Header.Get("X-Amz-Meta-Owner"); got != "alice" {
		t.Errorf("create sent x-amz-meta-owner %q, want alice", got)
	}
	if put.URL.Path != "/"+testBucket+"/a/b" {
		t.Errorf("create went to %q", put.URL.Path)
	}
	if res.Version != "9b2cf535f27731c974343645a3985328" || !res.StoreTime.Equal(date) || !res.LastModified.IsZero() {
		t.Errorf("create result %+v: want the unquoted ETag, StoreTime %v, no LastModified", res, date)
	}

	if _, err := s.Replace(ctx, "a/b", []byte("more"), nil, "9b2cf535f27731c974343645a3985328"); err != nil {
		t.Fatal(err)
	}
	put = f.lastRequest(http.MethodPut)
	if got := put.Header.Get("If-Match"); got != `"9b2cf535f27731c974343645a3985328"` {
		t.Errorf("replace sent If-Match %q, want the quoted ETag", got)
	}
	if got := put.Header.Get("If-None-Match"); got != "" {
		t.Errorf("replace sent If-None-Match %q", got)
	}

	if err := s.Delete(ctx, "a/b", "v1"); err != nil {
		t.Fatal(err)
	}
	if got := f.lastRequest(http.MethodDelete).Header.Get("If-Match"); got != `"v1"` {
		t.Errorf("delete sent If-Match %q, want \"v1\"", got)
	}

	// An empty version must never become a missing If-Match header.
	before := f.requests(http.MethodPut) + f.requests(http.MethodDelete)
	_, err = s.Replace(ctx, "a/b", []byte("x"), nil, "")
	checkEmptyVersion(t, err, "replace")
	checkEmptyVersion(t, s.Delete(ctx, "a/b", ""), "delete")
	if after := f.requests(http.MethodPut) + f.requests(http.MethodDelete); after != before {
		t.Errorf("writes with an empty version reached the store")
	}
}

func checkEmptyVersion(t *testing.T, err error, op string) {
	t.Helper()
	var pe *providers.Error
	if !errors.Is(err, providers.ErrPrecondition) || !errors.As(err, &pe) || pe.Op != op {
		t.Errorf("%s with an empty version: %v, want ErrPrecondition", op, err)
	}
}

// TestReads checks what Get, Stat and List make of S3's replies.
func TestReads(t *testing.T) {
	modified := time.Date(2026, 11, 29, 9, 59, 58, 0, time.UTC)
	date := time.Date(2026, 11, 29, 10, 0, 1, 0, time.UTC)
	body := "0123456789"
	var slowDowns atomic.Int32
	slowDowns.Store(1)
	s, f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Query().Get("list-type") == "2" {
			awsHeaders(w)
			w.Header().Set("Date", date.Format(http.TimeFormat))
			w.Header().Set("Content-Type", "application/xml")
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>bkt</Name><Prefix>p/</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys><IsTruncated>true</IsTruncated><NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>
<Contents><Key>p/a b</Key><LastModified>2026-11-29T09:59:58.000Z</LastModified><ETag>&quot;aaaa&quot;</ETag><Size>3</Size><StorageClass>STANDARD</StorageClass></Contents>
<Contents><Key>p/ключ</Key><LastModified>2026-11-29T09:59:58.000Z</LastModified><ETag>&quot;bbbb&quot;</ETag><Size>5</Size><StorageClass>STANDARD</StorageClass></Contents>
</ListBucketResult>`)
			return
		}
		// One SlowDown first: reads are retried through it.
		if r.Method == http.MethodGet && slowDowns.Add(-1) >= 0 {
			s3Error(w, r, 503, "SlowDown", "Please reduce your request rate.")
			return
		}
		awsHeaders(w)
		w.Header().Set("Date", date.Format(http.TimeFormat))
		w.Header().Set("ETag", `"781e5e245d69b566979b86e28d23f2c7"`)
		w.Header().Set("Last-Modified", modified.Format(http.TimeFormat))
		w.Header().Set("X-Amz-Meta-Owner", "alice")
		w.Header().Set("x-amz-meta-Lease-Holder", "Node 7")
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		io.WriteString(w, body)
	})
	ctx := t.Context()
	wantMD := map[string]string{"owner": "alice", "lease-holder": "Node 7"}
	checkAttrs := func(op string, a providers.Attrs) {
		t.Helper()
		if a.Key != "p/k" || a.Version != "781e5e245d69b566979b86e28d23f2c7" || a.Size != int64(len(body)) ||
			!a.LastModified.Equal(modified) || !a.StoreTime.Equal(date) {
			t.Errorf("%s: attrs %+v", op, a)
		}
		if len(a.Metadata) != len(wantMD) || a.Metadata["owner"] != "alice" || a.Metadata["lease-holder"] != "Node 7" {
			t.Errorf("%s: metadata %q, want %q", op, a.Metadata, wantMD)
		}
	}

	o, err := s.Get(ctx, "p/k", 0)
	if err != nil {
		t.Fatalf("get through one SlowDown: %v", err)
	}
	if n := f.requests(http.MethodGet); n != 2 {
		t.Errorf("%d GET requests, want 2 (one retried)", n)
	}
	if string(o.Data) != body {
		t.Errorf("get: data %q", o.Data)
	}
	checkAttrs("get", o.Attrs)

	a, err := s.Stat(ctx, "p/k")
	if err != nil {
		t.Fatal(err)
	}
	checkAttrs("stat", *a)

	if _, err := s.Get(ctx, "p/k", int64(len(body))); err != nil {
		t.Errorf("get at exactly the bound: %v", err)
	}
	_, err = s.Get(ctx, "p/k", int64(len(body))-1)
	var pe *providers.Error
	if !errors.Is(err, providers.ErrTooLarge) || !errors.As(err, &pe) || pe.Key != "p/k" {
		t.Errorf("get over the bound: %v, want ErrTooLarge naming the key", err)
	}

	page, err := s.List(ctx, "p/", "token-1", 2)
	if err != nil {
		t.Fatal(err)
	}
	q := f.lastRequest(http.MethodGet).URL.Query()
	if q.Get("prefix") != "p/" || q.Get("continuation-token") != "token-1" || q.Get("max-keys") != "2" {
		t.Errorf("list sent %v", q)
	}
	if page.NextToken != "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=" || len(page.Objects) != 2 {
		t.Fatalf("list page %+v", page)
	}
	if o := page.Objects[1]; o.Key != "p/ключ" || o.Version != "bbbb" || o.Size != 5 || !o.LastModified.Equal(modified) || !o.StoreTime.Equal(date) {
		t.Errorf("list object %+v", o)
	}
}

// TestInvalidKeys: keys S3 cannot hold are refused before any request.
func TestInvalidKeys(t *testing.T) {
	s, f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		awsHeaders(w)
		w.Header().Set("ETag", `"e"`)
	})
	for _, key := range []string{"", "/abs", strings.Repeat("k", 1025), "bad\xffutf8", "tab\there", "nul\x00"} {
		for _, op := range []string{"get", "stat", "create", "replace", "delete"} {
			err := do(t.Context(), s, op, key)
			var pe *providers.Error
			if !errors.Is(err, providers.ErrInvalidKey) || !errors.As(err, &pe) || pe.Op != op || pe.Key != key {
				t.Errorf("%s %q: %v, want ErrInvalidKey", op, key, err)
			}
		}
	}
	if _, err := s.Create(t.Context(), strings.Repeat("k", 1024), nil, nil); errors.Is(err, providers.ErrInvalidKey) {
		t.Errorf("a key of 1024 bytes was refused: %v", err)
	}
	if n := f.requests(http.MethodPut) + f.requests(http.MethodGet) + f.requests(http.MethodHead) + f.requests(http.MethodDelete); n != 1 {
		t.Errorf("%d requests reached the store, want only the valid create", n)
	}
}

func TestProperties(t *testing.T) {
	p := New(nil, "b").Properties()
	want := providers.Properties{Name: "s3", Where: `bucket "b"`, VersionsRepeat: true, TimestampGranularity: time.Second, MaxKeyBytes: 1024}
	if p != want {
		t.Errorf("Properties() = %+v, want %+v", p, want)
	}
}

func TestAs(t *testing.T) {
	client := s3sdk.New(s3sdk.Options{Region: "us-east-1"})
	s := New(client, "b")
	var got *s3sdk.Client
	if !s.As(&got) || got != client {
		t.Errorf("As(**s3.Client) = %v, %p; want true, %p", s.As(&got), got, client)
	}
	var wrong *http.Client
	if s.As(&wrong) || s.As(got) {
		t.Error("As accepted a target that is not **s3.Client")
	}
}
