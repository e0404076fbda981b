package s3store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/objlease/objlease/providers"
)

// settingsFake answers the three bucket requests BucketSettings sends:
// each subresource's answer is a status and a body (an error code for a
// status above 299).
func settingsFake(t *testing.T, answers map[string]func(w http.ResponseWriter, r *http.Request)) *providers.Bucket {
	t.Helper()
	s, _ := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		awsHeaders(w)
		for sub, answer := range answers {
			if r.URL.Query().Has(sub) {
				answer(w, r)
				return
			}
		}
		s3Error(w, r, 400, "Unexpected", "the test does not expect "+r.URL.String())
	})
	return s
}

func xmlBody(body string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?>`+body)
	}
}

func errorAnswer(status int, code string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) { s3Error(w, r, status, code, code) }
}

// TestBucketSettings: what BucketSettings makes of S3's answers, request
// by request: each refused or unimplemented request leaves its setting
// unknown with a note; a missing bucket ends the call.
func TestBucketSettings(t *testing.T) {
	const lifecycle = `<LifecycleConfiguration>
<Rule><ID>tagged</ID><Filter><Tag><Key>k</Key><Value>v</Value></Tag></Filter><Status>Enabled</Status><NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays></NoncurrentVersionExpiration></Rule>
<Rule><ID>other</ID><Filter><Prefix>other/</Prefix></Filter><Status>Enabled</Status><NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays></NoncurrentVersionExpiration></Rule>
<Rule><ID>off</ID><Filter><Prefix>leases/</Prefix></Filter><Status>Disabled</Status><NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays></NoncurrentVersionExpiration></Rule>
<Rule><ID>leases</ID><Filter><Prefix>leases/</Prefix></Filter><Status>Enabled</Status><NoncurrentVersionExpiration><NoncurrentDays>3</NoncurrentDays></NoncurrentVersionExpiration></Rule>
<Rule><ID>all</ID><Filter></Filter><Status>Enabled</Status><NoncurrentVersionExpiration><NoncurrentDays>30</NoncurrentDays><NewerNoncurrentVersions>5</NewerNoncurrentVersions></NoncurrentVersionExpiration></Rule>
</LifecycleConfiguration>`
	enabled := xmlBody(`<VersioningConfiguration><Status>Enabled</Status></VersioningConfiguration>`)
	noLock := errorAnswer(404, "ObjectLockConfigurationNotFoundError")
	noRules := errorAnswer(404, "NoSuchLifecycleConfiguration")

	t.Run("versioned, a rule for the prefix", func(t *testing.T) {
		s := settingsFake(t, map[string]func(http.ResponseWriter, *http.Request){
			"versioning": enabled, "object-lock": noLock, "lifecycle": xmlBody(lifecycle)})
		got, err := s.BucketSettings(t.Context(), "leases/job")
		if err != nil {
			t.Fatal(err)
		}
		if got.Versioning != providers.SettingEnabled || got.ObjectLock != providers.SettingOff || got.SoftDelete != providers.SettingOff ||
			got.Lifecycle != providers.SettingEnabled || got.NoncurrentExpiry != 3*24*time.Hour {
			t.Fatalf("%+v", got)
		}
		if len(got.Notes) != 1 || !strings.Contains(got.Notes[0], `"all" keeps the newest 5 noncurrent versions`) {
			t.Errorf("notes %q", got.Notes)
		}
	})

	t.Run("never versioned, no rules, object lock", func(t *testing.T) {
		s := settingsFake(t, map[string]func(http.ResponseWriter, *http.Request){
			"versioning":  xmlBody(`<VersioningConfiguration/>`),
			"object-lock": xmlBody(`<ObjectLockConfiguration><ObjectLockEnabled>Enabled</ObjectLockEnabled><Rule><DefaultRetention><Mode>COMPLIANCE</Mode><Days>30</Days></DefaultRetention></Rule></ObjectLockConfiguration>`),
			"lifecycle":   noRules})
		got, err := s.BucketSettings(t.Context(), "leases/")
		if err != nil {
			t.Fatal(err)
		}
		if got.Versioning != providers.SettingOff || got.Lifecycle != providers.SettingOff || got.ObjectLock != providers.SettingEnabled ||
			got.ObjectLockRetention != 30*24*time.Hour || got.ObjectLockDetail != "default retention COMPLIANCE, 30 days" {
			t.Fatalf("%+v", got)
		}
	})

	t.Run("suspended", func(t *testing.T) {
		s := settingsFake(t, map[string]func(http.ResponseWriter, *http.Request){
			"versioning": xmlBody(`<VersioningConfiguration><Status>Suspended</Status></VersioningConfiguration>`), "object-lock": noLock, "lifecycle": noRules})
		if got, err := s.BucketSettings(t.Context(), "leases/"); err != nil || got.Versioning != providers.SettingSuspended {
			t.Fatalf("%+v, %v", got, err)
		}
	})

	t.Run("refused and not implemented", func(t *testing.T) {
		s := settingsFake(t, map[string]func(http.ResponseWriter, *http.Request){
			"versioning": errorAnswer(403, "AccessDenied"), "object-lock": errorAnswer(501, "NotImplemented"), "lifecycle": noRules})
		got, err := s.BucketSettings(t.Context(), "leases/")
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"versioning (GetBucketVersioning): 403 AccessDenied", "object lock (GetObjectLockConfiguration): 501 NotImplemented"}
		if got.Versioning != providers.SettingUnknown || got.ObjectLock != providers.SettingUnknown || got.Lifecycle != providers.SettingOff ||
			fmt.Sprint(got.Notes) != fmt.Sprint(want) {
			t.Fatalf("%+v; want notes %q", got, want)
		}
	})

	t.Run("no bucket", func(t *testing.T) {
		s := settingsFake(t, map[string]func(http.ResponseWriter, *http.Request){"versioning": errorAnswer(404, "NoSuchBucket")})
		_, err := s.BucketSettings(t.Context(), "leases/")
		var pe *providers.Error
		if !errors.Is(err, providers.ErrNoBucket) || !errors.As(err, &pe) || pe.Op != "settings" || pe.Key != "leases/" {
			t.Fatalf("%v, want ErrNoBucket naming settings and the prefix", err)
		}
	})
}

// TestExpiresNoncurrent: which lifecycle rules cover a lease record under
// a prefix: an enabled rule with NoncurrentVersionExpiration whose prefix
// (in the filter, in its And, or the old top-level one) starts the
// record's, and no tag or size filter a record would miss.
func TestExpiresNoncurrent(t *testing.T) {
	days := func(n int32) *types.NoncurrentVersionExpiration {
		return &types.NoncurrentVersionExpiration{NoncurrentDays: aws.Int32(n)}
	}
	for _, c := range []struct {
		name string
		rule types.LifecycleRule
		want time.Duration
	}{
		{"whole bucket", types.LifecycleRule{Status: types.ExpirationStatusEnabled, NoncurrentVersionExpiration: days(2)}, 48 * time.Hour},
		{"filter prefix", types.LifecycleRule{Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("lea")}, NoncurrentVersionExpiration: days(1)}, 24 * time.Hour},
		{"old prefix", types.LifecycleRule{Status: types.ExpirationStatusEnabled, Prefix: aws.String("leases/"), NoncurrentVersionExpiration: days(1)}, 24 * time.Hour},
		{"and prefix", types.LifecycleRule{Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{And: &types.LifecycleRuleAndOperator{Prefix: aws.String("leases/")}}, NoncurrentVersionExpiration: days(1)}, 24 * time.Hour},
		{"other prefix", types.LifecycleRule{Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("logs/")}, NoncurrentVersionExpiration: days(1)}, 0},
		{"longer prefix", types.LifecycleRule{Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("leases/job/x")}, NoncurrentVersionExpiration: days(1)}, 0},
		{"disabled", types.LifecycleRule{Status: types.ExpirationStatusDisabled, NoncurrentVersionExpiration: days(1)}, 0},
		{"current versions only", types.LifecycleRule{Status: types.ExpirationStatusEnabled, Expiration: &types.LifecycleExpiration{Days: aws.Int32(1)}}, 0},
		{"tag", types.LifecycleRule{Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Tag: &types.Tag{Key: aws.String("k"), Value: aws.String("v")}}, NoncurrentVersionExpiration: days(1)}, 0},
		{"large objects", types.LifecycleRule{Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{ObjectSizeGreaterThan: aws.Int64(128 << 10)}, NoncurrentVersionExpiration: days(1)}, 0},
	} {
		got, _, ok := expiresNoncurrent(c.rule, "leases/job/")
		if got != c.want || ok != (c.want > 0) {
			t.Errorf("%s: %v, %v; want %v", c.name, got, ok, c.want)
		}
	}
}

// TestNoncurrentRule: the rule is an S3 lifecycle configuration the SDK
// (and the AWS CLI, whose JSON it is) reads back as written.
func TestNoncurrentRule(t *testing.T) {
	s, _ := newFake(t, func(w http.ResponseWriter, r *http.Request) {})
	rule, ok := s.NoncurrentRule("leases/", 2)
	if !ok {
		t.Fatal("no rule")
	}
	var lc types.BucketLifecycleConfiguration
	if err := json.Unmarshal([]byte(rule.Text), &lc); err != nil {
		t.Fatal(err)
	}
	if len(lc.Rules) != 1 {
		t.Fatalf("%s", rule.Text)
	}
	r := lc.Rules[0]
	got, _, covers := expiresNoncurrent(r, "leases/job")
	if !covers || got != 48*time.Hour || aws.ToString(r.ID) != "objlease-noncurrent-leases" || !aws.ToBool(r.Expiration.ExpiredObjectDeleteMarker) {
		t.Fatalf("%s", rule.Text)
	}
	if !strings.HasPrefix(rule.Apply, "aws s3api put-bucket-lifecycle-configuration --bucket "+testBucket+" ") || !strings.Contains(rule.Apply, "--endpoint-url http://127.0.0.1:") {
		t.Errorf("apply %q", rule.Apply)
	}
	if id := ruleID(strings.Repeat("a/", 200)); len(id) != 255 {
		t.Errorf("rule id of %d bytes", len(id))
	}
}

func TestIsWasabi(t *testing.T) {
	for ep, want := range map[string]bool{
		"https://s3.wasabisys.com":                true,
		"https://s3.eu-central-1.wasabisys.com":   true,
		"https://s3.amazonaws.com":                false,
		"https://notwasabisys.com":                false,
		"http://127.0.0.1:9000":                   false,
		"https://wasabisys.com.attacker.example/": false,
	} {
		if got := isWasabi(aws.String(ep)); got != want {
			t.Errorf("isWasabi(%s) = %v", ep, got)
		}
	}
}
