package azurestore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"path"
	"strings"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	sdkblob "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/driver"
)

// store is the driver.Driver for one Azure Blob Storage container; New
// puts it under a *providers.Bucket.
type store struct {
	client    *container.Client
	container string // for messages
	// versioning is what the last successful write's reply said of blob
	// versioning (versioningUnseen, versioningOff, versioningOn).
	versioning atomic.Int32
}

var _ driver.Driver = (*store)(nil)

// New returns the store that keeps its objects in the container client
// points at. The caller owns the client's credentials, transport and retry
// policy (writes disable retries per call; see the package documentation).
func New(client *container.Client) *providers.Bucket {
	return providers.NewBucket(newStore(client)).WithRequestTimeout(providers.DefaultRequestTimeout)
}

// NewDriver returns the driver New wraps, for a caller that puts its own
// layer (such as package faulty) between it and providers.NewBucket.
func NewDriver(client *container.Client) driver.Driver { return newStore(client) }

func newStore(client *container.Client) *store {
	return &store{client: client, container: containerName(client.URL())}
}

// containerName is the last path segment of a container URL.
func containerName(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return rawURL
	}
	return path.Base(strings.TrimSuffix(u.Path, "/"))
}

// noRetry disables the SDK's retries for one conditional write: a retried
// write whose first reply was lost would report a false precondition failure.
func noRetry(ctx context.Context) context.Context {
	return policy.WithRetryOptions(ctx, policy.RetryOptions{MaxRetries: -1})
}

// Read reads a blob's bytes, attributes and metadata in one request.
func (s *store) Read(ctx context.Context, key string, _ int64) (*driver.Reader, error) {
	resp, err := s.client.NewBlobClient(key).DownloadStream(ctx, nil)
	if err != nil {
		return nil, s.mapError("get", key, err)
	}
	size := int64(-1)
	if resp.ContentLength != nil {
		size = *resp.ContentLength
	}
	return &driver.Reader{
		Attrs: driver.Attrs{
			Key:          key,
			Version:      etag(resp.ETag),
			Size:         size,
			Metadata:     decodeMetadata(resp.Metadata),
			LastModified: deref(resp.LastModified),
			StoreTime:    deref(resp.Date),
		},
		Body: resp.Body,
	}, nil
}

// Stat reads a blob's attributes and metadata.
func (s *store) Stat(ctx context.Context, key string) (*driver.Attrs, error) {
	resp, err := s.client.NewBlobClient(key).GetProperties(ctx, nil)
	if err != nil {
		return nil, s.mapError("stat", key, err)
	}
	return &driver.Attrs{
		Key:          key,
		Version:      etag(resp.ETag),
		Size:         deref(resp.ContentLength),
		Metadata:     decodeMetadata(resp.Metadata),
		LastModified: deref(resp.LastModified),
		StoreTime:    deref(resp.Date),
	}, nil
}

// Create uploads the blob with If-None-Match: *.
func (s *store) Create(ctx context.Context, key string, data []byte, metadata map[string]string) (driver.WriteResult, error) {
	return s.CreateFrom(ctx, key, bodyOf(data), metadata)
}

// CreateFrom implements driver.StreamWriter.
func (s *store) CreateFrom(ctx context.Context, key string, body *io.SectionReader, metadata map[string]string) (driver.WriteResult, error) {
	star := azcore.ETagAny
	return s.put(ctx, "create", key, body, metadata, &sdkblob.ModifiedAccessConditions{IfNoneMatch: &star})
}

// Replace uploads the blob with If-Match: ifVersion.
func (s *store) Replace(ctx context.Context, key string, data []byte, metadata map[string]string, ifVersion string) (driver.WriteResult, error) {
	return s.ReplaceFrom(ctx, key, bodyOf(data), metadata, ifVersion)
}

// ReplaceFrom implements driver.StreamWriter.
func (s *store) ReplaceFrom(ctx context.Context, key string, body *io.SectionReader, metadata map[string]string, ifVersion string) (driver.WriteResult, error) {
	if err := checkVersion(ifVersion); err != nil {
		return driver.WriteResult{}, fmt.Errorf("%w: %w", driver.ErrPrecondition, err)
	}
	return s.put(ctx, "replace", key, body, metadata, &sdkblob.ModifiedAccessConditions{IfMatch: ifMatch(ifVersion)})
}

// bodyOf is data as a body to send.
func bodyOf(data []byte) *io.SectionReader {
	return io.NewSectionReader(bytes.NewReader(data), 0, int64(len(data)))
}

func (s *store) put(ctx context.Context, op, key string, body *io.SectionReader, metadata map[string]string, cond *sdkblob.ModifiedAccessConditions) (driver.WriteResult, error) {
	md, err := encodeMetadata(metadata)
	if err != nil {
		return driver.WriteResult{}, err
	}
	resp, err := s.client.NewBlockBlobClient(key).Upload(noRetry(ctx),
		streaming.NopCloser(driver.Exact(body)),
		&blockblob.UploadOptions{
			Metadata:         md,
			AccessConditions: &sdkblob.AccessConditions{ModifiedAccessConditions: cond},
		})
	if err != nil {
		return driver.WriteResult{}, s.mapError(op, key, err)
	}
	if resp.VersionID != nil {
		s.versioning.Store(versioningOn)
	} else {
		s.versioning.Store(versioningOff)
	}
	return driver.WriteResult{
		Version:      etag(resp.ETag),
		LastModified: deref(resp.LastModified),
		StoreTime:    deref(resp.Date),
	}, nil
}

// Delete deletes the blob with If-Match: ifVersion.
func (s *store) Delete(ctx context.Context, key string, ifVersion string) error {
	if err := checkVersion(ifVersion); err != nil {
		return fmt.Errorf("%w: %w", driver.ErrPrecondition, err)
	}
	_, err := s.client.NewBlobClient(key).Delete(noRetry(ctx), &sdkblob.DeleteOptions{
		AccessConditions: &sdkblob.AccessConditions{
			ModifiedAccessConditions: &sdkblob.ModifiedAccessConditions{IfMatch: ifMatch(ifVersion)},
		},
	})
	if err != nil {
		return s.mapError("delete", key, err)
	}
	return nil
}

// List returns one page of blobs under prefix; pageToken is Azure's marker.
func (s *store) List(ctx context.Context, prefix, pageToken string, pageSize int) (driver.ListPage, error) {
	opts := &container.ListBlobsFlatOptions{Prefix: &prefix}
	if pageToken != "" {
		opts.Marker = &pageToken
	}
	if pageSize > 0 {
		n := int32(min(pageSize, 5000)) // Azure's maximum page
		opts.MaxResults = &n
	}
	resp, err := s.client.NewListBlobsFlatPager(opts).NextPage(ctx)
	if err != nil {
		return driver.ListPage{}, s.mapError("list", prefix, err)
	}
	var page driver.ListPage
	if resp.Segment != nil {
		for _, b := range resp.Segment.BlobItems {
			a := driver.Attrs{Key: deref(b.Name), StoreTime: deref(resp.Date)}
			if p := b.Properties; p != nil {
				a.Version = etag(p.ETag)
				a.Size = deref(p.ContentLength)
				a.LastModified = deref(p.LastModified)
			}
			page.Objects = append(page.Objects, a)
		}
	}
	page.NextToken = deref(resp.NextMarker)
	return page, nil
}

// Properties reports Azure's declared behaviour.
func (s *store) Properties() driver.Properties {
	return driver.Properties{
		Name:                 "azblob",
		Where:                fmt.Sprintf("container %q", s.container),
		VersionsRepeat:       false, // the ETag changes on every write, even of identical bytes
		TimestampGranularity: time.Second,
		MaxKeyBytes:          1024,
	}
}

// As sets *target to the container client when target is a **container.Client.
func (s *store) As(target any) bool {
	p, ok := target.(**container.Client)
	if ok {
		*p = s.client
	}
	return ok
}

// Close does nothing: the caller owns the client.
func (s *store) Close() error { return nil }

// CheckKey refuses keys Azure would store under a different name, beyond
// the portable rules.
func (s *store) CheckKey(key string) error {
	// The service normalises URL paths: "." and ".." segments are resolved and
	// a trailing dot or slash is dropped, so such a key would name another blob.
	for _, seg := range strings.Split(key, "/") {
		if seg == "" || strings.HasSuffix(seg, ".") {
			return fmt.Errorf("path segment %q is empty or ends with '.'", seg)
		}
	}
	return nil
}

// checkVersion refuses versions that would make If-Match unconditional.
func checkVersion(v string) error {
	if t := strings.Trim(v, `"`); t == "" || t == "*" {
		return fmt.Errorf("version %q matches no single blob version", v)
	}
	return nil
}

// encodeMetadata turns portable keys into Azure metadata names ('-' -> '_').
func encodeMetadata(md map[string]string) (map[string]*string, error) {
	if len(md) == 0 {
		return nil, nil
	}
	out := make(map[string]*string, len(md))
	for k, v := range md {
		if k == "" || k[0] >= '0' && k[0] <= '9' {
			return nil, fmt.Errorf("metadata key %q: must not be empty or start with a digit on Azure", k)
		}
		for _, c := range k {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return nil, fmt.Errorf("metadata key %q: only a-z, 0-9 and '-' are portable", k)
			}
		}
		for i := 0; i < len(v); i++ {
			if v[i] < 0x20 || v[i] > 0x7e {
				return nil, fmt.Errorf("metadata %q: value must be printable ASCII", k)
			}
		}
		out[strings.ReplaceAll(k, "-", "_")] = &v
	}
	return out, nil
}

// decodeMetadata undoes encodeMetadata and the case changes made by the store.
func decodeMetadata(md map[string]*string) map[string]string {
	out := make(map[string]string, len(md))
	for k, v := range md {
		out[strings.ReplaceAll(strings.ToLower(k), "_", "-")] = deref(v)
	}
	return out
}

// etag is the version for an ETag. Headers quote ETags and listings do
// not, so versions are kept unquoted.
func etag(e *azcore.ETag) string {
	if e == nil {
		return ""
	}
	return strings.Trim(string(*e), `"`)
}

// ifMatch is the If-Match value for a version (quoted, as HTTP wants).
func ifMatch(version string) *azcore.ETag {
	e := azcore.ETag(`"` + strings.Trim(version, `"`) + `"`)
	return &e
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
