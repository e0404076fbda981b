package azurestore

import (
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/objlease/objlease/providers"
)

// Fixed answers, as Azure formats them.
const (
	lastModified = "Sat, 29 Nov 2026 10:00:01 GMT"
	dateHeader   = "Sat, 29 Nov 2026 10:00:02 GMT"
	newETag      = `"0x8DD2F0000000002"`
	version      = "0x8DD2F0000000002" // versions are ETags without quotes
)

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(http.TimeFormat, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// TestWire checks the conditional headers each write sends and that versions,
// timestamps and metadata are read from the answers.
func TestWire(t *testing.T) {
	type seen struct{ method, path, ifMatch, ifNoneMatch, meta string }
	var got seen
	s, _ := fakeAzure(t, func(w http.ResponseWriter, r *http.Request) {
		got = seen{r.Method, r.URL.EscapedPath(), r.Header.Get("If-Match"), r.Header.Get("If-None-Match"), r.Header.Get("x-ms-meta-lease_nonce")}
		h := w.Header()
		h.Set("Date", dateHeader)
		switch r.Method {
		case http.MethodPut:
			io.Copy(io.Discard, r.Body)
			h.Set("ETag", newETag)
			h.Set("Last-Modified", lastModified)
			w.WriteHeader(http.StatusCreated)
		case http.MethodDelete:
			w.WriteHeader(http.StatusAccepted)
		case http.MethodGet, http.MethodHead:
			if r.URL.Query().Get("comp") == "list" {
				// Listings carry ETags unquoted.
				h.Set("Content-Type", "application/xml")
				io.WriteString(w, `<?xml version="1.0" encoding="utf-8"?><EnumerationResults ServiceEndpoint="http://x/" ContainerName="leases"><Prefix>jobs/</Prefix><MaxResults>1</MaxResults><Blobs><Blob><Name>jobs/nightly report</Name><Properties><Last-Modified>`+lastModified+`</Last-Modified><Etag>0x8DD2F0000000002</Etag><Content-Length>6</Content-Length><BlobType>BlockBlob</BlobType></Properties></Blob></Blobs><NextMarker>2!88!next</NextMarker></EnumerationResults>`)
				return
			}
			h.Set("ETag", newETag)
			h.Set("Last-Modified", lastModified)
			h.Set("Content-Length", "6")
			h.Set("x-ms-blob-type", "BlockBlob")
			h.Set("X-Ms-Meta-Lease_nonce", "n1") // canonicalised, as Azurite and Go send it
			if r.Method == http.MethodGet {
				io.WriteString(w, "record")
			}
		}
	})
	ctx := context.Background()
	const key = "jobs/nightly report"
	wantPath := "/devstoreaccount1/leases/jobs%2Fnightly%20report"
	md := map[string]string{"lease-nonce": "n1"}

	res, err := s.Create(ctx, key, []byte("record"), md)
	if err != nil {
		t.Fatal(err)
	}
	if want := (seen{"PUT", wantPath, "", "*", "n1"}); got != want {
		t.Errorf("create sent %+v, want %+v", got, want)
	}
	want := providers.WriteResult{Version: version, LastModified: mustTime(t, lastModified), StoreTime: mustTime(t, dateHeader)}
	if !res.LastModified.Equal(want.LastModified) || !res.StoreTime.Equal(want.StoreTime) || res.Version != want.Version {
		t.Errorf("create = %+v, want %+v", res, want)
	}

	if _, err := s.Replace(ctx, key, []byte("record"), md, "0x1"); err != nil {
		t.Fatal(err)
	}
	if want := (seen{"PUT", wantPath, `"0x1"`, "", "n1"}); got != want {
		t.Errorf("replace sent %+v, want %+v", got, want)
	}

	if err := s.Delete(ctx, key, `"0x1"`); err != nil {
		t.Fatal(err)
	}
	if want := (seen{"DELETE", wantPath, `"0x1"`, "", ""}); got != want {
		t.Errorf("delete sent %+v, want %+v", got, want)
	}

	obj, err := s.Get(ctx, key, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Stat(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []providers.Attrs{obj.Attrs, *st} {
		if a.Key != key || a.Version != version || a.Size != 6 || !maps.Equal(a.Metadata, md) ||
			!a.LastModified.Equal(mustTime(t, lastModified)) || !a.StoreTime.Equal(mustTime(t, dateHeader)) {
			t.Errorf("attrs = %+v", a)
		}
	}
	if string(obj.Data) != "record" {
		t.Errorf("data = %q", obj.Data)
	}

	if _, err := s.Get(ctx, key, 5); !errors.Is(err, providers.ErrTooLarge) {
		t.Errorf("Get with bound 5 of 6 bytes: %v, want ErrTooLarge", err)
	}

	page, err := s.List(ctx, "jobs/", "", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Objects) != 1 || page.NextToken != "2!88!next" {
		t.Fatalf("list = %+v", page)
	}
	if a := page.Objects[0]; a.Key != key || a.Version != version || a.Size != 6 ||
		!a.LastModified.Equal(mustTime(t, lastModified)) || !a.StoreTime.Equal(mustTime(t, dateHeader)) {
		t.Errorf("listed attrs = %+v", a)
	}
}

// TestRefusedLocally covers arguments that never reach the store.
func TestRefusedLocally(t *testing.T) {
	s, n := fakeAzure(t, func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("unexpected request %s %s", r.Method, r.URL)
	})
	ctx := context.Background()
	for _, key := range []string{"", "/abs", "dir/", "a//b", "a/./b", "a/../b", "ends.", "seg./x", strings.Repeat("k", 1025), "bad\xff"} {
		if _, err := s.Create(ctx, key, nil, nil); !errors.Is(err, providers.ErrInvalidKey) {
			t.Errorf("Create(%q): %v, want ErrInvalidKey", key, err)
		}
	}
	for _, v := range []string{"", "*"} {
		if _, err := s.Replace(ctx, "k", nil, nil, v); !errors.Is(err, providers.ErrPrecondition) {
			t.Errorf("Replace(ifVersion %q): %v, want ErrPrecondition", v, err)
		}
		if err := s.Delete(ctx, "k", v); !errors.Is(err, providers.ErrPrecondition) {
			t.Errorf("Delete(ifVersion %q): %v, want ErrPrecondition", v, err)
		}
	}
	for _, md := range []map[string]string{{"Upper": "v"}, {"9lives": "v"}, {"under_score": "v"}, {"k": "line\nbreak"}, {"k": "ü"}} {
		_, err := s.Create(ctx, "k", nil, md)
		var pe *providers.Error
		if !errors.As(err, &pe) || pe.Key != "k" || !strings.Contains(err.Error(), "metadata") {
			t.Errorf("Create with metadata %q: %v, want an error about metadata", md, err)
		}
	}
	if n.Load() != 0 {
		t.Errorf("%d requests reached the store", n.Load())
	}
}

func TestMetadataNames(t *testing.T) {
	enc, err := encodeMetadata(map[string]string{"lease-nonce": "a", "x": "b", "-lead": "c"})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"lease_nonce", "x", "_lead"} {
		if enc[k] == nil {
			t.Errorf("encoded %v lacks %q", enc, k)
		}
	}
	// The store hands names back in whatever case it likes.
	a, b, c := "a", "b", "c"
	got := decodeMetadata(map[string]*string{"Lease_nonce": &a, "X": &b, "_LEAD": &c})
	if want := map[string]string{"lease-nonce": "a", "x": "b", "-lead": "c"}; !maps.Equal(got, want) {
		t.Errorf("decoded %v, want %v", got, want)
	}
}

func TestPropertiesAndAs(t *testing.T) {
	s, _ := fakeAzure(t, func(w http.ResponseWriter, r *http.Request) {})
	p := s.Properties()
	if p.Name != "azblob" || p.VersionsRepeat || p.TimestampGranularity != time.Second || p.MinWriteInterval != 0 {
		t.Errorf("Properties() = %+v", p)
	}
	var c *container.Client
	if !s.As(&c) || c == nil || containerName(c.URL()) != testContainer {
		t.Error("As(**container.Client) did not reach the client")
	}
	var wrong *http.Client
	if s.As(&wrong) {
		t.Error("As(**http.Client) reported success")
	}
	if d := NewDriver(c).(*store); d.container != testContainer {
		t.Errorf("container name %q, want %q", d.container, testContainer)
	}
}
