package integration

// cloudProxy sits between an SDK client and an emulator and answers as the
// real cloud does where the emulator does not, so that the drivers meet the
// real status codes:
//
//   - S3 (before versitygw): a conditional write (PUT with If-Match or
//     If-None-Match, DELETE with If-Match) that arrives while another to the
//     same key is being applied gets 409 ConditionalRequestConflict, as AWS
//     answers racing writes (versitygw answers 412 or lets both through
//     one after the other); a conditional DELETE of a key the proxy saw
//     deleted gets 404 NoSuchKey (versitygw: 204); a ListObjectsV2 page
//     comes back in reverse key order, as S3 Express One Zone directory
//     buckets list out of lexical order.
//   - GCS (before fake-gcs-server): a write to an object less than a second
//     after the last one that landed gets 429 rateLimitExceeded or, every
//     other time, 410 Gone, as GCS answers its one-write-a-second limit
//     (fake-gcs-server never throttles).
//
// Whatever the proxy answers itself never reaches the emulator: nothing was
// written, as on the real cloud.

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

type cloudProxy struct {
	URL    string
	kind   string // "s3" or "gcs"
	bucket string
	rp     *httputil.ReverseProxy
	// s3: how long a conditional write is held before it is sent on, so
	// that racing writes overlap as they do on AWS.
	hold time.Duration
	// gcs: the least time between two writes to an object that the proxy
	// does not throttle (GCS: about a second).
	minInterval time.Duration

	mu        sync.Mutex
	inflight  map[string]int       // s3: conditional writes being applied, by key
	absent    map[string]bool      // s3: keys the proxy saw deleted
	lastWrite map[string]time.Time // gcs: when a write to the object last landed
	answered  map[string]int       // answers the proxy gave itself, by status and code
	before    func(*http.Request)  // run once before the next conditional DELETE is sent on
}

func newCloudProxy(t *testing.T, kind, upstream, bucket string) *cloudProxy {
	t.Helper()
	up, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	p := &cloudProxy{kind: kind, bucket: bucket, hold: 5 * time.Millisecond, minInterval: time.Second,
		inflight: map[string]int{}, absent: map[string]bool{}, lastWrite: map[string]time.Time{}, answered: map[string]int{}}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(up)
			if kind == "s3" {
				// The client signed the Host it addressed: keep it.
				r.Out.Host = r.In.Host
			}
		},
		ModifyResponse: p.observe,
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// count reports how often the proxy answered status code itself.
func (p *cloudProxy) count(answer string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.answered[answer]
}

func (p *cloudProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p.kind == "gcs" {
		p.serveGCS(w, r)
		return
	}
	p.serveS3(w, r)
}

func (p *cloudProxy) s3Key(r *http.Request) string {
	return strings.TrimPrefix(r.URL.Path, "/"+p.bucket+"/")
}

func (p *cloudProxy) serveS3(w http.ResponseWriter, r *http.Request) {
	key := p.s3Key(r)
	conditional := r.Method == http.MethodPut && (r.Header.Get("If-Match") != "" || r.Header.Get("If-None-Match") != "") ||
		r.Method == http.MethodDelete && r.Header.Get("If-Match") != ""
	if !conditional {
		p.rp.ServeHTTP(w, r)
		return
	}
	p.mu.Lock()
	if r.Method == http.MethodDelete && p.before != nil {
		hook := p.before
		p.before = nil
		p.mu.Unlock()
		hook(r)
		p.mu.Lock()
	}
	switch {
	case p.inflight[key] > 0:
		p.answered["409 ConditionalRequestConflict"]++
		p.mu.Unlock()
		s3Answer(w, 409, "ConditionalRequestConflict", "A conflicting conditional operation is currently in progress against this resource. Please try again.")
		return
	case r.Method == http.MethodDelete && p.absent[key]:
		p.answered["404 NoSuchKey"]++
		p.mu.Unlock()
		s3Answer(w, 404, "NoSuchKey", "The specified key does not exist.")
		return
	}
	p.inflight[key]++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.inflight[key]--
		p.mu.Unlock()
	}()
	time.Sleep(p.hold)
	p.rp.ServeHTTP(w, r)
}

// s3Answer writes an S3 error reply.
func s3Answer(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("Date", time.Now().UTC().Format(http.TimeFormat))
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>%s</Code><Message>%s</Message><RequestId>0000000000000000</RequestId></Error>`, code, message)
}

// gcsWrite returns the object a GCS JSON API request writes, if it does:
// an upload names it in ?name=, a DELETE or PATCH in its path.
func (p *cloudProxy) gcsWrite(r *http.Request) (string, bool) {
	switch {
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/upload/storage/v1/b/"+p.bucket+"/o"):
		return r.URL.Query().Get("name"), true
	case r.Method == http.MethodDelete || r.Method == http.MethodPatch:
		obj, ok := strings.CutPrefix(r.URL.Path, "/storage/v1/b/"+p.bucket+"/o/")
		return obj, ok
	}
	return "", false
}

func (p *cloudProxy) serveGCS(w http.ResponseWriter, r *http.Request) {
	obj, write := p.gcsWrite(r)
	if write {
		p.mu.Lock()
		if last, ok := p.lastWrite[obj]; ok && time.Since(last) < p.minInterval {
			n := p.answered["429 rateLimitExceeded"] + p.answered["410 Gone"]
			status, reason, label := 429, "rateLimitExceeded", "429 rateLimitExceeded"
			if n%2 == 1 {
				status, reason, label = 410, "gone", "410 Gone"
			}
			p.answered[label]++
			p.mu.Unlock()
			io.Copy(io.Discard, r.Body)
			msg := "The object " + p.bucket + "/" + obj + " exceeded the rate limit for object mutation operations (create, update, and delete). Please reduce your request rate. See https://cloud.google.com/storage/docs/gcs429."
			w.Header().Set("Content-Type", "application/json; charset=UTF-8")
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"error":{"code":%d,"message":%q,"errors":[{"message":%q,"domain":"usageLimits","reason":%q}]}}`, status, msg, msg, reason)
			return
		}
		p.mu.Unlock()
	}
	p.rp.ServeHTTP(w, r)
}

var s3Contents = regexp.MustCompile(`(?s)<Contents>.*?</Contents>`)

// observe notes what the emulator's answers show and rewrites listings.
func (p *cloudProxy) observe(resp *http.Response) error {
	r := resp.Request
	ok := resp.StatusCode/100 == 2
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.kind == "gcs" {
		if obj, write := p.gcsWrite(r); write && ok {
			p.lastWrite[obj] = time.Now()
		}
		return nil
	}
	key := p.s3Key(r)
	switch {
	case r.Method == http.MethodPut && ok:
		delete(p.absent, key)
	case r.Method == http.MethodDelete && ok:
		p.absent[key] = true
	case r.Method == http.MethodGet && ok && r.URL.Query().Get("list-type") == "2":
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		// S3 Express One Zone: keys out of lexical order.
		items := s3Contents.FindAll(body, -1)
		slices.Reverse(items)
		i := 0
		body = s3Contents.ReplaceAllFunc(body, func([]byte) []byte { i++; return items[i-1] })
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
		p.answered["list reversed"]++
	}
	return nil
}
