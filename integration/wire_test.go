package integration

// What lease operations cost on the wire, counted as HTTP requests leave
// the client (not as store calls): a poll reads the record once, a takeover
// reads it and writes it conditionally, on every cloud.

import (
	"testing"

	"github.com/objlease/objlease/integration/emulator"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/wirecount"
)

func wireCosts(t *testing.T, st providers.Store, wc *wirecount.Transport) {
	t.Helper()
	ctx := t.Context()
	key := emulator.Prefix(t) + "lease"
	res, err := st.Create(ctx, key, []byte("held by a"), map[string]string{"holder": "a"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Delete(ctx, key, res.Version) })

	wc.Reset()
	o, err := st.Get(ctx, key, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if o.Version != res.Version || o.Metadata["holder"] != "a" {
		t.Errorf("poll read %+v, want version %s and holder a", o.Attrs, res.Version)
	}
	if c := wc.Reset(); c.Total() != 1 {
		t.Errorf("poll: %d requests (%v), want 1", c.Total(), c)
	}

	o, err = st.Get(ctx, key, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	res, err = st.Replace(ctx, key, []byte("held by b"), map[string]string{"holder": "b"}, o.Version)
	if err != nil {
		t.Fatal(err)
	}
	if c := wc.Reset(); c.Total() != 2 {
		t.Errorf("takeover: %d requests (%v), want 2", c.Total(), c)
	}
}

func TestWireS3(t *testing.T) {
	e := emulator.VersityGW(t)
	st, wc := countedS3(e, e.Bucket, e.AccessKey, e.SecretKey)
	wireCosts(t, st, wc)
}

func TestWireGCS(t *testing.T) {
	g := emulator.FakeGCS(t)
	st, wc := countedGCS(t, g.Endpoint, g.Bucket)
	wireCosts(t, st, wc)
}

func TestWireAzure(t *testing.T) {
	a := emulator.Azurite(t)
	st, wc := countedAz(t, a, a.Container, azuriteKey(a))
	wireCosts(t, st, wc)
}
