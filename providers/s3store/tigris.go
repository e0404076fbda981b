package s3store

import (
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	s3sdk "github.com/aws/aws-sdk-go-v2/service/s3"
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
