package s3store

import (
	"crypto/md5"
	"encoding/hex"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/objlease/objlease/providers/probe"
)

// memS3 is a small in-memory S3 that honours If-None-Match and If-Match on
// PUT as AWS does. On DELETE it honours If-Match only if deleteIfMatch is
// set: some S3-compatible servers accept the header on DELETE and ignore it.
type memS3 struct {
	deleteIfMatch bool
	mu            sync.Mutex
	objects       map[string]memObject
}

type memObject struct {
	data []byte
	etag string
	meta http.Header
}

func (m *memS3) handle(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := strings.TrimPrefix(r.URL.Path, "/"+testBucket+"/")
	obj, exists := m.objects[key]
	ifMatch := strings.Trim(r.Header.Get("If-Match"), `"`)
	switch r.Method {
	case http.MethodPut:
		data, _ := io.ReadAll(r.Body)
		switch {
		case r.Header.Get("If-None-Match") == "*" && exists:
			s3Error(w, r, 412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
			return
		case ifMatch != "" && !exists:
			s3Error(w, r, 404, "NoSuchKey", "The specified key does not exist.")
			return
		case ifMatch != "" && ifMatch != obj.etag:
			s3Error(w, r, 412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
			return
		}
		sum := md5.Sum(data)
		meta := http.Header{}
		for k, v := range r.Header {
			if strings.HasPrefix(strings.ToLower(k), "x-amz-meta-") {
				meta[k] = v
			}
		}
		m.objects[key] = memObject{data: data, etag: hex.EncodeToString(sum[:]), meta: meta}
		awsHeaders(w)
		w.Header().Set("ETag", `"`+m.objects[key].etag+`"`)
	case http.MethodGet, http.MethodHead:
		if !exists {
			s3Error(w, r, 404, "NoSuchKey", "The specified key does not exist.")
			return
		}
		awsHeaders(w)
		for k, v := range obj.meta {
			w.Header()[k] = v
		}
		w.Header().Set("ETag", `"`+obj.etag+`"`)
		w.Header().Set("Content-Length", strconv.Itoa(len(obj.data)))
		w.Header().Set("Last-Modified", "Sun, 29 Nov 2026 10:00:00 GMT")
		if r.Method == http.MethodGet {
			w.Write(obj.data)
		}
	case http.MethodDelete:
		if m.deleteIfMatch && exists && ifMatch != "" && ifMatch != obj.etag {
			s3Error(w, r, 412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
			return
		}
		delete(m.objects, key)
		awsHeaders(w)
		w.WriteHeader(http.StatusNoContent)
	}
}

// TestProbeFindsDeleteIgnoringIfMatch: a server that honours conditional
// PUTs but ignores If-Match on DELETE (MinIO) is found by the check that
// sends the stale delete, and reported as the store's missing capability
// with a caveat: no lease or fenced write is a delete. The stale If-Match
// must reach the server for that.
func TestProbeFindsDeleteIgnoringIfMatch(t *testing.T) {
	for _, honoured := range []bool{true, false} {
		t.Run("delete If-Match honoured="+strconv.FormatBool(honoured), func(t *testing.T) {
			srv := &memS3{deleteIfMatch: honoured, objects: map[string]memObject{}}
			s, f := newFake(t, srv.handle)
			r, err := probe.Run(t.Context(), s, "probe/")
			if err != nil {
				t.Fatalf("delete If-Match honoured=%v: %v, want safe", honoured, err)
			}
			if r.DeleteUnconditional == honoured {
				t.Fatalf("DeleteUnconditional %v on a server that honours If-Match on DELETE: %v", r.DeleteUnconditional, honoured)
			}
			if honoured {
				return
			}
			if len(r.Caveats) == 0 || !strings.Contains(r.Caveats[0], "delete with a stale version succeeded") {
				t.Errorf("caveats %q do not name the stale-delete check", r.Caveats)
			}
			if f.requests(http.MethodDelete) == 0 {
				t.Error("no DELETE reached the server")
			}
		})
	}
}
