package wirecount_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/objlease/objlease/providers/wirecount"
)

func TestCounts(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	wc := wirecount.New(nil)
	c := &http.Client{Transport: wc}
	for _, m := range []string{"GET", "GET", "PUT"} {
		req, _ := http.NewRequest(m, srv.URL, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	srv.Close()
	// A request that finds nobody listening still left: it is counted.
	if _, err := c.Get(srv.URL); err == nil {
		t.Fatal("request to a closed server succeeded")
	}
	got := wc.Reset()
	if got["GET"] != 3 || got["PUT"] != 1 || got.Total() != 4 {
		t.Errorf("counts %v, want GET 3, PUT 1", got)
	}
	if n := wc.Counts().Total(); n != 0 {
		t.Errorf("%d requests after Reset, want 0", n)
	}
}
