package azurestore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/internal/bucketname"
)

// Scheme is the URL scheme this package registers with providers.Register.
const Scheme = "azblob"

// Environment variables read by OpenURL.
const (
	EnvConnectionString = "AZURE_STORAGE_CONNECTION_STRING"
	EnvAccount          = "AZURE_STORAGE_ACCOUNT"
)

func init() {
	if err := providers.Register(Scheme, func(ctx context.Context, u *url.URL, oo providers.OpenOptions) (*providers.Bucket, string, error) {
		var opts *container.ClientOptions
		if rt, ok := oo.RoundTripper(http.DefaultTransport.(*http.Transport).Clone()); ok {
			opts = &container.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: &http.Client{Transport: rt}}}
		}
		s, key, err := openURL(u, opts)
		if err != nil {
			return nil, "", err
		}
		return s, key, nil
	}); err != nil {
		panic(err)
	}
	if err := providers.RegisterHints(Scheme, providers.Hints{
		Container:     "container",
		Endpoint:      EnvConnectionString,
		Credentials:   EnvConnectionString + " or the Azure credential chain",
		NoCredentials: EnvConnectionString + ", or the Azure credential chain's AZURE_CLIENT_ID, AZURE_TENANT_ID and AZURE_CLIENT_SECRET",
	}); err != nil {
		panic(err)
	}
}

// OpenURL opens the store named by an azblob://CONTAINER/KEY URL (see the
// package documentation for query parameters and environment variables) and
// returns it with the key the URL points at. opts, which may be nil, are
// passed to the SDK client, e.g. to install a transport.
func OpenURL(ctx context.Context, rawURL string, opts *container.ClientOptions) (*providers.Bucket, string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, "", fmt.Errorf("%w %q: %v", providers.ErrBadURL, rawURL, err)
	}
	return openURL(u, opts)
}

// location is what an azblob URL says, before any client is built.
type location struct {
	container, key    string
	account, endpoint string // from the query; empty if not given
}

// ContainerRule is the rule for Azure Blob container names that Open
// enforces before any request; $root, $web and $logs are the service's own.
var ContainerRule = bucketname.Rule{
	Store: "Azure", Word: "container", Min: 3, Max: 63, Allowed: "-",
	NoDoubleHyphen: true, Special: []string{"$root", "$web", "$logs"},
	Summary: "Azure container names have 3 to 63 characters: lowercase letters, digits and hyphens, beginning and ending with a letter or digit, with no two hyphens in a row",
}

// checkAccount refuses a name no storage account can have (Azure's rule:
// 3 to 24 lowercase letters and digits), which would otherwise become a
// host name the request cannot even be built for.
func checkAccount(name string) error {
	if len(name) < 3 || len(name) > 24 {
		return fmt.Errorf("%q has %d characters; storage account names have 3 to 24 lowercase letters and digits", name, len(name))
	}
	for i, r := range name {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			return fmt.Errorf("%q has %q at byte %d; storage account names have 3 to 24 lowercase letters and digits", name, r, i)
		}
	}
	return nil
}

func parseURL(u *url.URL) (location, error) {
	bad := func(format string, args ...any) (location, error) {
		return location{}, fmt.Errorf("%w %q: %s", providers.ErrBadURL, u.Redacted(), fmt.Sprintf(format, args...))
	}
	if u.Scheme != Scheme {
		return bad("scheme is %q, want %q", u.Scheme, Scheme)
	}
	if u.User != nil || u.Port() != "" {
		return bad("want azblob://CONTAINER/KEY; give the account with ?account= or %s", EnvConnectionString)
	}
	if u.Host == "" {
		return bad("no container (want azblob://CONTAINER/KEY)")
	}
	if err := ContainerRule.Check(u.Host); err != nil {
		return location{}, fmt.Errorf("%w %q: %w", providers.ErrBadURL, u.Redacted(), err)
	}
	loc := location{container: u.Host, key: strings.TrimPrefix(u.Path, "/")}
	for name, vals := range u.Query() {
		switch name {
		case "account":
			if err := checkAccount(vals[0]); err != nil {
				return bad("account: %v", err)
			}
			loc.account = vals[0]
		case "endpoint":
			e, err := url.Parse(vals[0])
			if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
				return bad("endpoint %q is not an http(s) URL", vals[0])
			}
			loc.endpoint = strings.TrimSuffix(vals[0], "/")
		default:
			return bad("unknown query parameter %q (want account, endpoint)", name)
		}
	}
	return loc, nil
}

func openURL(u *url.URL, opts *container.ClientOptions) (*providers.Bucket, string, error) {
	loc, err := parseURL(u)
	if err != nil {
		return nil, "", err
	}
	opts = withTLSCheck(opts)
	account, endpoint := loc.account, loc.endpoint
	if account == "" && endpoint == "" {
		if cs := os.Getenv(EnvConnectionString); cs != "" {
			c, err := container.NewClientFromConnectionString(cs, loc.container, opts)
			if err != nil {
				return nil, "", fmt.Errorf("%w %q: %s: %v", providers.ErrBadURL, u.Redacted(), EnvConnectionString, err)
			}
			return New(c), loc.key, nil
		}
		account = os.Getenv(EnvAccount)
		if err := checkAccount(account); account != "" && err != nil {
			return nil, "", fmt.Errorf("%w %q: %s: %v", providers.ErrBadURL, u.Redacted(), EnvAccount, err)
		}
	}
	if endpoint == "" {
		if account == "" {
			return nil, "", fmt.Errorf("%w %q: no account: set %s or %s, or add ?account=NAME",
				providers.ErrBadURL, u.Redacted(), EnvConnectionString, EnvAccount)
		}
		endpoint = "https://" + account + ".blob.core.windows.net"
	}
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		return nil, "", fmt.Errorf("azblob: container %q: default Azure credential: %w", loc.container, err)
	}
	c, err := container.NewClient(endpoint+"/"+url.PathEscape(loc.container), tagCredential{cred}, opts)
	if err != nil {
		return nil, "", fmt.Errorf("%w %q: %v", providers.ErrBadURL, u.Redacted(), err)
	}
	return New(c), loc.key, nil
}

// tagCredential marks a failure to obtain a token with
// providers.ErrNoCredentials: the request it was for was never sent.
type tagCredential struct{ azcore.TokenCredential }

func (t tagCredential) GetToken(ctx context.Context, o policy.TokenRequestOptions) (azcore.AccessToken, error) {
	tok, err := t.TokenCredential.GetToken(ctx, o)
	if err != nil && ctx.Err() == nil {
		return tok, fmt.Errorf("%w: %w", providers.ErrNoCredentials, err)
	}
	return tok, err
}

// withTLSCheck returns a copy of opts whose transport marks an answer
// without TLS to an https:// endpoint (most often a plain HTTP one) as not
// worth retrying: the SDK would otherwise retry it for seconds before the
// caller could say what is wrong with the URL.
func withTLSCheck(opts *container.ClientOptions) *container.ClientOptions {
	o := container.ClientOptions{}
	if opts != nil {
		o = *opts
	}
	t := o.Transport
	if t == nil {
		t = &http.Client{Transport: http.DefaultTransport}
	}
	o.Transport = tlsCheck{t}
	return &o
}

type tlsCheck struct{ policy.Transporter }

func (t tlsCheck) Do(r *http.Request) (*http.Response, error) {
	resp, err := t.Transporter.Do(r)
	var rec tls.RecordHeaderError
	if err != nil && (errors.Is(err, http.ErrSchemeMismatch) || errors.As(err, &rec)) {
		return resp, notTLS{err}
	}
	return resp, err
}

// notTLS is an answer without TLS; the SDK's retry policy leaves an error
// with a NonRetriable method alone.
type notTLS struct{ error }

func (e notTLS) Unwrap() error { return e.error }
func (notTLS) NonRetriable()   {}
