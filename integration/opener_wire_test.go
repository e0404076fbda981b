package integration

// Stores opened by URL count on the wire when their options ask them to
// (providers.OpenOptions.Transport): what the bench's request figures
// rest on.

import (
	"context"
	"net/http"
	"testing"

	"github.com/objlease/objlease/integration/emulator"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/azurestore"
	"github.com/objlease/objlease/providers/wirecount"
)

func TestOpenedStoresCountOnTheWire(t *testing.T) {
	for _, tc := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"s3", func(t *testing.T) string {
			e := emulator.VersityGW(t)
			s3Env(t, e.AccessKey, e.SecretKey)
			return s3URL(e, e.Bucket)
		}},
		{"gcs", func(t *testing.T) string {
			g := emulator.FakeGCS(t)
			return gcsURL(g.Endpoint, g.Bucket, "")
		}},
		{"azure", func(t *testing.T) string {
			a := emulator.Azurite(t)
			t.Setenv(azurestore.EnvConnectionString, a.ConnectionString)
			return azURL(a.Container)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := tc.url(t)
			var wc *wirecount.Transport
			st, _, err := providers.OpenWith(t.Context(), raw, providers.OpenOptions{Transport: func(base http.RoundTripper) http.RoundTripper {
				wc = wirecount.New(base)
				return wc
			}})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if wc == nil {
				t.Fatal("the opener did not call OpenOptions.Transport")
			}
			key := emulator.Prefix(t) + "k"
			res, err := st.Create(wirecount.WithLabel(t.Context(), "create"), key, []byte("x"), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Delete(context.Background(), key, res.Version)
			if c := wc.Labeled(); c["create"] != 1 {
				t.Errorf("create: %v requests labelled, want 1", c)
			}
		})
	}
}
