package s3store

import (
	"context"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	s3sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// TigrisConsistent is a client option that adds X-Tigris-Consistent: true
// to every request. Tigris evaluates If-Match and If-None-Match on the
// object's leader, and serves reads from it, only for requests that carry
// the header; without it a conditional write can be judged against a stale
// replica. Requests to Tigris's own endpoints (t3.storage.dev,
// fly.storage.tigris.dev) carry it without this option; use it for a Tigris
// bucket reached under another name:
//
//	client := s3sdk.NewFromConfig(cfg, s3store.TigrisConsistent)
func TigrisConsistent(o *s3sdk.Options) {
	o.APIOptions = append(o.APIOptions, smithyhttp.SetHeaderValue("X-Tigris-Consistent", "true"))
}

// UnquotedETags is a client option that sends If-Match with the ETag
// unquoted ("d41d8cd9…", not "\"d41d8cd9…\""). Some S3-compatible servers
// (Ceph RGW 16, and others reported) compare If-Match with the object's
// ETag stripped of its quotes: S3's quoted form then never matches, and
// every conditional write against the current version is refused with
// 412, so a lease can be acquired but never renewed. The option rewrites
// the header before the request is signed:
//
//	client := s3sdk.NewFromConfig(cfg, s3store.UnquotedETags)
//
// Use it only where objlease doctor says so: it checks that the server
// still refuses a stale unquoted ETag.
func UnquotedETags(o *s3sdk.Options) {
	o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
		return stack.Build.Add(middleware.BuildMiddlewareFunc("UnquotedIfMatch",
			func(ctx context.Context, in middleware.BuildInput, next middleware.BuildHandler) (middleware.BuildOutput, middleware.Metadata, error) {
				if req, ok := in.Request.(*smithyhttp.Request); ok {
					if v := req.Header.Get("If-Match"); v != "" && v != "*" {
						req.Header.Set("If-Match", strings.Trim(v, `"`))
					}
				}
				return next.HandleBuild(ctx, in)
			}), middleware.After)
	})
}

// tigrisDomains are the domains of Tigris's S3 endpoints.
var tigrisDomains = []string{"storage.dev", "tigris.dev"}

// isTigris reports whether endpoint, a client's BaseEndpoint, is one of
// Tigris's.
func isTigris(endpoint *string) bool {
	u, err := url.Parse(aws.ToString(endpoint))
	if err != nil {
		return false
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	for _, d := range tigrisDomains {
		if host == d || strings.HasSuffix(host, "."+d) {
			return true
		}
	}
	return false
}
