package integration

// Tests of the azblob store against Azurite. With
// OBJLEASE_TEST_AZBLOB=azblob://CONTAINER/PREFIX/ they run against that real
// container instead, under that prefix, with the account chosen as
// providers/azblob documents (AZURE_STORAGE_ACCOUNT or ?account=, and
// azidentity's default credential chain).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/lease"

	"github.com/objlease/objlease/integration/emulator"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/azurestore"
	"github.com/objlease/objlease/providers/providertest"
)

// azTarget is the container a test runs against.
type azTarget struct {
	container string
	prefix    string // unique to the test
	connStr   string // Azurite's; empty on a real account
	rawURL    string // OBJLEASE_TEST_AZBLOB on a real account
}

func newAzTarget(t *testing.T) azTarget {
	t.Helper()
	if raw := os.Getenv("OBJLEASE_TEST_AZBLOB"); raw != "" {
		u, err := url.Parse(raw)
		if err != nil || u.Scheme != azurestore.Scheme || u.Host == "" {
			t.Fatalf("OBJLEASE_TEST_AZBLOB=%q: want azblob://CONTAINER/PREFIX/", raw)
		}
		return azTarget{container: u.Host, prefix: strings.TrimPrefix(u.Path, "/") + emulator.Prefix(t), rawURL: raw}
	}
	a := emulator.Azurite(t)
	return azTarget{container: a.Container, prefix: emulator.Prefix(t), connStr: a.ConnectionString}
}

func (a azTarget) real() bool { return a.connStr == "" }

// client builds an SDK client for containerName, as a user would, whose
// requests pass through rt (nil: the default transport). Read retries are
// kept but fast.
func (a azTarget) client(t *testing.T, containerName string, rt http.RoundTripper) *container.Client {
	t.Helper()
	if rt == nil {
		rt = http.DefaultTransport
	}
	opts := &container.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport: &http.Client{Transport: rt},
		Retry:     policy.RetryOptions{RetryDelay: 10 * time.Millisecond, MaxRetryDelay: 100 * time.Millisecond},
	}}
	if !a.real() {
		c, err := container.NewClientFromConnectionString(a.connStr, containerName, opts)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	u, _ := url.Parse(a.rawURL)
	u.Host, u.Path = containerName, ""
	s, _, err := azurestore.OpenURL(t.Context(), u.String(), opts)
	if err != nil {
		t.Fatalf("open %s: %v", u, err)
	}
	var c *container.Client
	s.As(&c)
	return c
}

// store is an azblob store on the target's container whose requests pass
// through rt.
func (a azTarget) store(t *testing.T, rt http.RoundTripper) *providers.Bucket {
	t.Helper()
	return azurestore.New(a.client(t, a.container, rt))
}

func TestAzblobConformance(t *testing.T) {
	a := newAzTarget(t)
	config := func(st *providers.Bucket, prefix string) providertest.Config {
		return providertest.Config{
			Bucket:        st,
			Prefix:        prefix,
			MissingBucket: azurestore.New(a.client(t, randomName(), nil)),
			As: &providertest.AsCheck{
				Store: func(s providers.Store) error {
					var c *container.Client
					if !s.As(&c) || c == nil {
						return errors.New("As(**container.Client) did not reach the client")
					}
					return nil
				},
				Error: func(err error) error {
					var re *azcore.ResponseError
					if !errors.As(err, &re) || re.StatusCode != 404 {
						return errors.New("errors.As did not reach a 404 *azcore.ResponseError")
					}
					return nil
				},
			},
		}
	}
	t.Run("Open", func(t *testing.T) {
		raw := a.rawURL
		if !a.real() {
			t.Setenv(azurestore.EnvConnectionString, a.connStr)
			t.Setenv(azurestore.EnvAccount, "")
			raw = "azblob://" + a.container + "/"
		}
		s, key, err := providers.Open(t.Context(), raw)
		if err != nil {
			t.Fatalf("open %s: %v", raw, err)
		}
		defer s.Close()
		if a.real() {
			key = "" // the prefix is already in a.prefix
		}
		providertest.Run(t, config(s, key+a.prefix+"open/"))
	})
	t.Run("New", func(t *testing.T) { providertest.Run(t, config(a.store(t, nil), a.prefix+"new/")) })
}

// mustCreateAz writes key and deletes it when the test ends.
func mustCreateAz(t *testing.T, s providers.Store, key string, data []byte, md map[string]string) providers.WriteResult {
	t.Helper()
	res, err := s.Create(t.Context(), key, data, md)
	if err != nil {
		t.Fatalf("create %q: %v", key, err)
	}
	t.Cleanup(func() {
		if a, err := s.Stat(context.Background(), key); err == nil {
			s.Delete(context.Background(), key, a.Version)
		}
	})
	return res
}

// wantAzErr fails t unless err matches sentinel, names op and key, and
// carries the store's answer; it returns that answer.
func wantAzErr(t *testing.T, err error, op, key string, sentinel error) *azcore.ResponseError {
	t.Helper()
	var pe *providers.Error
	var re *azcore.ResponseError
	switch {
	case !errors.Is(err, sentinel):
		t.Errorf("%s %q: got %v, want %v", op, key, err, sentinel)
	case !errors.As(err, &pe) || pe.Op != op || pe.Key != key:
		t.Errorf("%s %q: error does not name op and key: %v", op, key, err)
	case !errors.As(err, &re):
		t.Errorf("%s %q: native *azcore.ResponseError not reachable: %v", op, key, err)
	}
	return re
}

// If-None-Match: * on an existing blob is answered 409 BlobAlreadyExists,
// not 412, by Azure and Azurite alike.
func TestAzblobCreateExisting409(t *testing.T) {
	a := newAzTarget(t)
	s := a.store(t, nil)
	key := a.prefix + "obj"
	mustCreateAz(t, s, key, []byte("one"), nil)
	_, err := s.Create(t.Context(), key, []byte("two"), nil)
	re := wantAzErr(t, err, "create", key, providers.ErrPrecondition)
	if re != nil && (re.StatusCode != http.StatusConflict || re.ErrorCode != "BlobAlreadyExists") {
		t.Errorf("create %q: store answered %d %s, want 409 BlobAlreadyExists", key, re.StatusCode, re.ErrorCode)
	}
}

// A stale If-Match is answered 412 ConditionNotMet, for Put and Delete.
func TestAzblobStaleIfMatch412(t *testing.T) {
	a := newAzTarget(t)
	s := a.store(t, nil)
	ctx := t.Context()
	key := a.prefix + "obj"
	stale := mustCreateAz(t, s, key, []byte("one"), nil).Version
	cur, err := s.Replace(ctx, key, []byte("two"), nil, stale)
	if err != nil {
		t.Fatalf("replace %q: %v", key, err)
	}
	_, errReplace := s.Replace(ctx, key, []byte("three"), nil, stale)
	errDelete := s.Delete(ctx, key, stale)
	for op, err := range map[string]error{"replace": errReplace, "delete": errDelete} {
		re := wantAzErr(t, err, op, key, providers.ErrPrecondition)
		if re != nil && (re.StatusCode != http.StatusPreconditionFailed || re.ErrorCode != "ConditionNotMet") {
			t.Errorf("%s %q: store answered %d %s, want 412 ConditionNotMet", op, key, re.StatusCode, re.ErrorCode)
		}
	}
	if got, err := s.Stat(ctx, key); err != nil || got.Version != cur.Version {
		t.Errorf("stat %q after refused writes: %+v, %v; want version %q", key, got, err, cur.Version)
	}
}

// If-Match on a missing blob: Azurite answers 412 ConditionNotMet, Azure 404
// BlobNotFound. Both are a refused precondition.
func TestAzblobIfMatchMissingBlob(t *testing.T) {
	a := newAzTarget(t)
	s := a.store(t, nil)
	ctx := t.Context()
	key := a.prefix + "missing"
	version := mustCreateAz(t, s, a.prefix+"other", []byte("x"), nil).Version // a real ETag, of another blob
	_, errReplace := s.Replace(ctx, key, []byte("x"), nil, version)
	errDelete := s.Delete(ctx, key, version)
	for op, err := range map[string]error{"replace": errReplace, "delete": errDelete} {
		re := wantAzErr(t, err, op, key, providers.ErrPrecondition)
		if re == nil {
			continue
		}
		switch {
		case re.StatusCode == http.StatusPreconditionFailed && re.ErrorCode == "ConditionNotMet",
			re.StatusCode == http.StatusNotFound && re.ErrorCode == "BlobNotFound":
			t.Logf("%s %q: store answered %d %s", op, key, re.StatusCode, re.ErrorCode)
		default:
			t.Errorf("%s %q: store answered %d %s, want 412 ConditionNotMet or 404 BlobNotFound", op, key, re.StatusCode, re.ErrorCode)
		}
	}
	if _, err := s.Stat(ctx, key); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("stat %q after refused writes: %v, want ErrNotFound", key, err)
	}
}

// A blob held by a native Azure lease refuses writes with a Lease* code
// (Azurite: 412 LeaseIdMissing; Azure documents 409 or 412). That is not a
// version mismatch: reporting it as ErrPrecondition would send the lease
// protocol re-reading a version that has not moved.
func TestAzblobNativeLeaseIsNotPrecondition(t *testing.T) {
	a := newAzTarget(t)
	c := a.client(t, a.container, nil)
	s := azurestore.New(c)
	ctx := t.Context()
	key := a.prefix + "leased"
	v := mustCreateAz(t, s, key, []byte("one"), nil).Version

	lc, err := lease.NewBlobClient(c.NewBlobClient(key), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lc.AcquireLease(ctx, 15, nil); err != nil {
		t.Fatalf("acquire native lease on %q: %v", key, err)
	}
	released := false
	t.Cleanup(func() {
		if !released {
			lc.ReleaseLease(context.Background(), nil)
		}
	})

	_, errReplace := s.Replace(ctx, key, []byte("two"), nil, v)
	errDelete := s.Delete(ctx, key, v)
	for op, err := range map[string]error{"replace": errReplace, "delete": errDelete} {
		var re *azcore.ResponseError
		var pe *providers.Error
		switch {
		case err == nil:
			t.Fatalf("%s %q succeeded on a blob under a native lease", op, key)
		case errors.Is(err, providers.ErrPrecondition), errors.Is(err, providers.ErrUnknownOutcome):
			t.Errorf("%s %q: %v; a native lease is neither a version mismatch nor an unknown outcome", op, key, err)
		case !errors.As(err, &pe) || pe.Key != key || !errors.As(err, &re):
			t.Errorf("%s %q: error does not name the key or carry the answer: %v", op, key, err)
		case !strings.HasPrefix(re.ErrorCode, "Lease"):
			t.Errorf("%s %q: store answered %d %s, want a Lease* code", op, key, re.StatusCode, re.ErrorCode)
		default:
			t.Logf("%s %q: store answered %d %s", op, key, re.StatusCode, re.ErrorCode)
		}
	}

	if _, err := lc.ReleaseLease(ctx, nil); err != nil {
		t.Fatalf("release native lease on %q: %v", key, err)
	}
	released = true
	if _, err := s.Replace(ctx, key, []byte("two"), nil, v); err != nil {
		t.Errorf("replace %q once the native lease is released: %v", key, err)
	}
}

// Metadata names come back in the store's case (Azurite canonicalises them
// like HTTP headers) and may not contain '-'; the store hands back the
// portable lower-case names either way.
func TestAzblobMetadataNames(t *testing.T) {
	a := newAzTarget(t)
	c := a.client(t, a.container, nil)
	s := azurestore.New(c)
	ctx := t.Context()

	key := a.prefix + "ours"
	md := map[string]string{"lease-nonce": "n-1", "owner": "Alice Smith"}
	mustCreateAz(t, s, key, []byte("x"), md)
	raw, err := c.NewBlobClient(key).GetProperties(ctx, nil)
	if err != nil {
		t.Fatalf("get properties of %q: %v", key, err)
	}
	for k := range raw.Metadata {
		t.Logf("store holds metadata name %q", k)
	}
	if got, err := s.Stat(ctx, key); err != nil || !maps.Equal(got.Metadata, md) {
		t.Errorf("stat %q: metadata %q, %v; want %q", key, got.Metadata, err, md)
	}

	// Written by another tool, in mixed case.
	other := a.prefix + "theirs"
	val := "v"
	if _, err := c.NewBlockBlobClient(other).Upload(ctx, streaming.NopCloser(strings.NewReader("x")),
		&blockblob.UploadOptions{Metadata: map[string]*string{"Build_ID": &val}}); err != nil {
		t.Fatalf("upload %q: %v", other, err)
	}
	t.Cleanup(func() { c.NewBlobClient(other).Delete(context.Background(), nil) })
	o, err := s.Get(ctx, other, 0)
	if err != nil || !maps.Equal(o.Metadata, map[string]string{"build-id": "v"}) {
		t.Errorf("get %q: %+v, %v; want metadata build-id=v", other, o, err)
	}
}

// Last-Modified has whole-second resolution, as declared; StoreTime is the
// Date header, also whole seconds.
func TestAzblobTimestampGranularity(t *testing.T) {
	a := newAzTarget(t)
	s := a.store(t, nil)
	key := a.prefix + "obj"
	res := mustCreateAz(t, s, key, []byte("x"), nil)
	o, err := s.Get(t.Context(), key, 0)
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	g := s.Properties().TimestampGranularity
	for what, ts := range map[string]time.Time{
		"create LastModified": res.LastModified, "create StoreTime": res.StoreTime,
		"get LastModified": o.LastModified, "get StoreTime": o.StoreTime,
	} {
		if ts.IsZero() || !ts.Truncate(g).Equal(ts) {
			t.Errorf("%s of %q is %v, want a non-zero time in whole %v", what, key, ts.Format(time.RFC3339Nano), g)
		}
	}
	if !o.LastModified.Equal(res.LastModified) {
		t.Errorf("get %q: LastModified %v, create reported %v", key, o.LastModified, res.LastModified)
	}
}

// A missing container is not a missing blob: reads must not say ErrNotFound
// (the lease protocol would then try to create), and the error names the
// container.
func TestAzblobMissingContainer(t *testing.T) {
	a := newAzTarget(t)
	var b [6]byte
	rand.Read(b[:])
	name := "objlease-missing-" + hex.EncodeToString(b[:])
	s := azurestore.New(a.client(t, name, nil))
	ctx := t.Context()
	_, errGet := s.Get(ctx, "k", 0)
	_, errCreate := s.Create(ctx, "k", []byte("x"), nil)
	for op, err := range map[string]error{"get": errGet, "create": errCreate} {
		re := wantAzErr(t, err, op, "k", providers.ErrNoBucket)
		if errors.Is(err, providers.ErrNotFound) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s in container %q: %v; want an error naming the container, not ErrNotFound", op, name, err)
		}
		if re != nil && re.ErrorCode != "ContainerNotFound" {
			t.Errorf("%s: store answered %d %s, want ContainerNotFound", op, re.StatusCode, re.ErrorCode)
		}
	}
}

// Keys with spaces, non-Latin letters and emoji reach the store as the same
// blob name and come back unchanged from Get and List.
func TestAzblobUnicodeKeys(t *testing.T) {
	a := newAzTarget(t)
	c := a.client(t, a.container, nil)
	s := azurestore.New(c)
	ctx := t.Context()
	dir := a.prefix + "dir with spaces/"
	keys := []string{dir + "ключ 🔒", dir + "naïve café/file+plus&amp", dir + "100% done?"}
	for _, key := range keys {
		res := mustCreateAz(t, s, key, []byte(key), nil)
		o, err := s.Get(ctx, key, 0)
		if err != nil || string(o.Data) != key || o.Version != res.Version {
			t.Errorf("get %q: %+v, %v", key, o, err)
		}
		if _, err := c.NewBlobClient(key).GetProperties(ctx, nil); err != nil {
			t.Errorf("the SDK does not find blob %q: %v", key, err)
		}
	}
	page, err := s.List(ctx, dir, "", 100)
	if err != nil {
		t.Fatalf("list %q: %v", dir, err)
	}
	var listed []string
	for _, o := range page.Objects {
		listed = append(listed, o.Key)
	}
	if want := []string{keys[2], keys[1], keys[0]}; !slices.Equal(listed, want) {
		t.Errorf("list %q = %q, want %q", dir, listed, want)
	}
}

// errAzLostReply is what the test transport returns in place of a reply it
// dropped.
var errAzLostReply = errors.New("connection reset after the store answered (reply dropped by the test)")

// azReplyDropper is an http.RoundTripper that lets requests reach the store
// and, when armed for a method, reads the store's whole reply to the next
// request with that method and returns errAzLostReply instead: a write that
// landed although its sender never heard so.
type azReplyDropper struct {
	base http.RoundTripper

	mu      sync.Mutex
	method  string // armed for this method; "" when not armed
	dropped []string
}

func (d *azReplyDropper) arm(method string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.method = method
}

func (d *azReplyDropper) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := d.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	drop := d.method != "" && req.Method == d.method
	if drop {
		d.method = ""
		d.dropped = append(d.dropped, req.Method+" "+resp.Status)
	}
	d.mu.Unlock()
	if !drop {
		return resp, nil
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return nil, errAzLostReply
}

func (d *azReplyDropper) drops() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.dropped...)
}

// A conditional write whose reply is lost is ErrUnknownOutcome, not
// ErrPrecondition, and re-reading shows it landed.
func TestAzblobLostReply(t *testing.T) {
	a := newAzTarget(t)
	d := &azReplyDropper{base: http.DefaultTransport}
	s := a.store(t, d)
	ctx := t.Context()
	key := a.prefix + "obj"
	t.Cleanup(func() {
		if got, err := s.Stat(context.Background(), key); err == nil {
			s.Delete(context.Background(), key, got.Version)
		}
	})
	wantUnknown := func(op string, err error) {
		t.Helper()
		if !errors.Is(err, providers.ErrUnknownOutcome) || errors.Is(err, providers.ErrPrecondition) {
			t.Fatalf("%s %q with its reply lost: %v, want ErrUnknownOutcome only", op, key, err)
		}
		if !errors.Is(err, errAzLostReply) {
			t.Errorf("%s %q: transport error not reachable: %v", op, key, err)
		}
	}

	d.arm(http.MethodPut)
	_, err := s.Create(ctx, key, []byte("created"), map[string]string{"nonce": "n1"})
	wantUnknown("create", err)
	o, err := s.Get(ctx, key, 0)
	if err != nil || string(o.Data) != "created" || o.Metadata["nonce"] != "n1" {
		t.Fatalf("get %q after a create with a lost reply: %+v, %v; want the created object", key, o, err)
	}

	d.arm(http.MethodPut)
	_, err = s.Replace(ctx, key, []byte("replaced"), map[string]string{"nonce": "n2"}, o.Version)
	wantUnknown("replace", err)
	o2, err := s.Get(ctx, key, 0)
	if err != nil || string(o2.Data) != "replaced" || o2.Metadata["nonce"] != "n2" || o2.Version == o.Version {
		t.Fatalf("get %q after a replace with a lost reply: %+v, %v; want the replaced object", key, o2, err)
	}

	d.arm(http.MethodDelete)
	wantUnknown("delete", s.Delete(ctx, key, o2.Version))
	if _, err := s.Stat(ctx, key); !errors.Is(err, providers.ErrNotFound) {
		t.Fatalf("stat %q after a delete with a lost reply: %v, want ErrNotFound", key, err)
	}

	// Each write was sent once: had the SDK retried, the retry would have
	// met the first attempt's result.
	want := []string{"PUT 201 Created", "PUT 201 Created", "DELETE 202 Accepted"}
	if got := d.drops(); !slices.Equal(got, want) {
		t.Errorf("dropped replies %q, want %q", got, want)
	}
}

// Why writes do not use the SDK's retries: with them, a Create whose first
// reply is lost is retried, meets its own blob and comes back 409
// BlobAlreadyExists, which reads as "someone else got there first".
func TestAzblobSDKRetryTurnsLostReplyIntoConflict(t *testing.T) {
	a := newAzTarget(t)
	d := &azReplyDropper{base: http.DefaultTransport}
	c := a.client(t, a.container, d) // SDK retries on
	key := a.prefix + "obj"
	star := azcore.ETagAny
	d.arm(http.MethodPut)
	_, err := c.NewBlockBlobClient(key).Upload(t.Context(), streaming.NopCloser(strings.NewReader("x")), &blockblob.UploadOptions{
		AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: &star}},
	})
	t.Cleanup(func() { c.NewBlobClient(key).Delete(context.Background(), nil) })
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.ErrorCode != "BlobAlreadyExists" {
		t.Fatalf("retried create of %q: %v; want the retry to meet 409 BlobAlreadyExists", key, err)
	}
}

// Reads keep the SDK's retries: a Get whose first reply is lost still
// succeeds.
func TestAzblobReadRetriedAfterLostReply(t *testing.T) {
	a := newAzTarget(t)
	d := &azReplyDropper{base: http.DefaultTransport}
	s := a.store(t, d)
	key := a.prefix + "obj"
	mustCreateAz(t, s, key, []byte("x"), nil)
	d.arm(http.MethodGet)
	if o, err := s.Get(t.Context(), key, 0); err != nil || string(o.Data) != "x" {
		t.Fatalf("get %q with its first reply lost: %+v, %v", key, o, err)
	}
	if len(d.drops()) != 1 {
		t.Errorf("dropped %q, want one GET", d.drops())
	}
}
