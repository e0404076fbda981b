package s3store

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	s3sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/logging"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/internal/bucketname"
)

func init() {
	if err := providers.Register("s3", open); err != nil {
		panic(err)
	}
	if err := providers.RegisterHints("s3", hints); err != nil {
		panic(err)
	}
}

// hints are what to check when an s3:// URL's store is not set up.
var hints = providers.Hints{
	Container:     "bucket",
	Endpoint:      "AWS_ENDPOINT_URL",
	Credentials:   "AWS_PROFILE, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
	NoCredentials: "AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
	NoBucket:      endpointPathHint,
}

// endpointPathHint explains a missing bucket by the path of u's endpoint
// (?endpoint=, AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL), which requests
// carry before the bucket: the store looked for another bucket, or for
// none. It is "" for an endpoint without a path.
func endpointPathHint(u *url.URL) string {
	ep := u.Query().Get("endpoint")
	for _, v := range []string{"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"} {
		if ep == "" {
			ep = os.Getenv(v)
		}
	}
	e, err := url.Parse(ep)
	if ep == "" || err != nil || strings.Trim(e.Path, "/") == "" {
		return ""
	}
	return fmt.Sprintf("bucket %q does not exist at that endpoint, whose path %s S3 requests carry before the bucket: an S3 endpoint is the server's address alone (%s://%s), or check the name", u.Host, e.Path, e.Scheme, e.Host)
}

// BucketRule is the rule for S3 bucket names (general purpose and
// directory buckets) that Open enforces before any request. Buckets created
// before March 2018 in us-east-1 could have capitals and underscores; this
// package does not open them.
var BucketRule = bucketname.Rule{
	Store: "S3", Word: "bucket", Min: 3, Max: 63, Allowed: ".-",
	NoDoubleDot: true, NoIP: true,
	Summary: "S3 bucket names have 3 to 63 characters: lowercase letters, digits, dots and hyphens, beginning and ending with a letter or digit, with no two dots in a row, not formed like an IP address",
}

// urlConfig is what an s3:// URL asks for.
type urlConfig struct {
	bucket, key      string
	endpoint, region string
	pathStyle        *bool // nil: decide from whether an endpoint is set
	tigrisConsistent bool  // send X-Tigris-Consistent: true to any endpoint
	unquotedETag     bool  // send If-Match without quotes (UnquotedETags)
}

func parseURL(u *url.URL) (urlConfig, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %q: %s", providers.ErrBadURL, u.Redacted(), fmt.Sprintf(format, args...))
	}
	c := urlConfig{bucket: u.Host, key: strings.TrimPrefix(u.Path, "/")}
	switch {
	case u.Scheme != "s3":
		return c, bad("scheme is not s3")
	case u.User != nil:
		return c, bad("credentials do not belong in the URL; use the AWS credential chain")
	case c.bucket == "":
		return c, bad("no bucket (want s3://BUCKET/KEY)")
	case u.Port() != "":
		return c, bad("bucket %q has a port; put the store's address in ?endpoint=", c.bucket)
	}
	if err := BucketRule.Check(c.bucket); err != nil {
		return c, fmt.Errorf("%w %q: %w", providers.ErrBadURL, u.Redacted(), err)
	}
	for name, vals := range u.Query() {
		if len(vals) != 1 {
			return c, bad("parameter %q given %d times", name, len(vals))
		}
		v := vals[0]
		switch name {
		case "endpoint":
			if !httpURL(v) {
				return c, bad("endpoint %q is not an http(s) URL", v)
			}
			c.endpoint = v
		case "region":
			c.region = v
		case "path_style":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return c, bad("path_style %q is not true or false", v)
			}
			c.pathStyle = &b
		case "tigris_consistent":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return c, bad("tigris_consistent %q is not true or false", v)
			}
			c.tigrisConsistent = b
		case "unquoted_etag":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return c, bad("unquoted_etag %q is not true or false", v)
			}
			c.unquotedETag = b
		default:
			return c, bad("unknown parameter %q (want endpoint, region, path_style, tigris_consistent, unquoted_etag)", name)
		}
	}
	if c.endpoint == "" {
		// The SDK reads these; a malformed one would fail every request
		// with its endpoint-rule error.
		for _, name := range []string{"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"} {
			if v := os.Getenv(name); v != "" && !httpURL(v) {
				return c, fmt.Errorf("%w: %s %q is not an http(s) URL: fix or unset it (or give ?endpoint=)", providers.ErrBadURL, name, v)
			}
		}
	}
	return c, nil
}

// httpURL reports whether v is an http:// or https:// URL with a host.
func httpURL(v string) bool {
	e, err := url.Parse(v)
	return err == nil && (e.Scheme == "http" || e.Scheme == "https") && e.Host != ""
}

// open is the Opener for s3:// URLs; see the package doc.
func open(ctx context.Context, u *url.URL, oo providers.OpenOptions) (*providers.Bucket, string, error) {
	c, err := parseURL(u)
	if err != nil {
		return nil, "", err
	}
	// The SDK's own log lines (such as a warning that a response body could
	// not be drained) would break the CLI's one-line errors; what matters
	// reaches the caller as an error.
	opts := []func(*config.LoadOptions) error{config.WithLogger(logging.Nop{})}
	if c.region != "" {
		opts = append(opts, config.WithRegion(c.region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, "", fmt.Errorf("s3 bucket %q: loading AWS configuration: %w", c.bucket, err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.Credentials != nil {
		cfg.Credentials = tagCredentials{cfg.Credentials}
	}
	endpointSet := c.endpoint != "" || os.Getenv("AWS_ENDPOINT_URL_S3") != "" || os.Getenv("AWS_ENDPOINT_URL") != ""
	pathStyle := endpointSet
	if c.pathStyle != nil {
		pathStyle = *c.pathStyle
	}
	client := s3sdk.NewFromConfig(cfg, func(o *s3sdk.Options) {
		if rt, ok := oo.RoundTripper(http.DefaultTransport.(*http.Transport).Clone()); ok {
			o.HTTPClient = &http.Client{Transport: rt}
		}
		if c.endpoint != "" {
			o.BaseEndpoint = aws.String(c.endpoint)
		}
		o.UsePathStyle = pathStyle
		if c.tigrisConsistent {
			TigrisConsistent(o)
		}
		if c.unquotedETag {
			UnquotedETags(o)
		}
	})
	return New(client, c.bucket), c.key, nil
}

// tagCredentials marks a failure to obtain credentials with
// providers.ErrNoCredentials: the request was never sent, and the SDK's
// message for it ("get identity: get credentials: failed to refresh
// cached credentials, no EC2 IMDS role found, ...") has no type of its own.
type tagCredentials struct{ aws.CredentialsProvider }

func (t tagCredentials) Retrieve(ctx context.Context) (aws.Credentials, error) {
	c, err := t.CredentialsProvider.Retrieve(ctx)
	if err != nil && ctx.Err() == nil {
		return c, fmt.Errorf("%w: %w", providers.ErrNoCredentials, err)
	}
	return c, err
}
