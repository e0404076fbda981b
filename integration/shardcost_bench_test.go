//go:build linux

package integration

// BenchmarkShardGroupRequests counts the requests a settled shard group
// sends to the S3 emulator (versitygw): a group of N in-process workers
// (shard.New, each in a session of its own with its own S3 client) on M
// shards, balanced, left alone for three TTLs (the scans of balancing,
// and the first periodic one, are over) and then counted over a window of
// three TTLs. It
// reports the requests per shard-hour by kind. With OBJLEASE_BENCH_BEFORE
// set to a git revision, the same program built at that revision is
// measured beside the one built from this tree:
//
//	cd integration && OBJLEASE_EMULATORS=process OBJLEASE_BENCH_BEFORE=1e65b4a \
//	  go test -run '^$' -bench BenchmarkShardGroupRequests -benchtime 1x -timeout 60m .

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/objlease/objlease/integration/emulator"
)

// shardBenchSource runs one group and prints what its members sent during
// the window as JSON. It is built into the root module with an overlay, so
// that it uses that revision's shard package.
const shardBenchSource = `package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	s3sdk "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/shard"
	"github.com/objlease/objlease/providers/s3store"
)

type counts struct{ list, get, head, put, del, other atomic.Int64 }

type counting struct {
	rt http.RoundTripper
	c  *counts
}

func (t counting) RoundTrip(r *http.Request) (*http.Response, error) {
	switch {
	case r.Method == http.MethodGet && (r.URL.Query().Has("list-type") || r.URL.Query().Has("prefix")):
		t.c.list.Add(1)
	case r.Method == http.MethodGet:
		t.c.get.Add(1)
	case r.Method == http.MethodHead:
		t.c.head.Add(1)
	case r.Method == http.MethodPut:
		t.c.put.Add(1)
	case r.Method == http.MethodDelete:
		t.c.del.Add(1)
	default:
		t.c.other.Add(1)
	}
	return t.rt.RoundTrip(r)
}

func main() {
	a := os.Args[1:]
	endpoint, region, key, secret, bucket, prefix := a[0], a[1], a[2], a[3], a[4], a[5]
	n, _ := strconv.Atoi(a[6])
	m, _ := strconv.Atoi(a[7])
	ttl, _ := time.ParseDuration(a[8])
	settle, _ := time.ParseDuration(a[9])
	window, _ := time.ParseDuration(a[10])
	var c counts
	ids := make([]string, m)
	for i := range ids {
		ids[i] = fmt.Sprintf("s%04d", i)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var workers []*shard.Worker
	for i := range n {
		client := s3sdk.New(s3sdk.Options{
			Region: region, BaseEndpoint: aws.String(endpoint), UsePathStyle: true,
			Credentials: credentials.NewStaticCredentialsProvider(key, secret, ""),
			HTTPClient:  &http.Client{Transport: counting{http.DefaultTransport.(*http.Transport).Clone(), &c}},
		})
		store := s3store.New(client, bucket)
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		sess, err := objlease.NewSession(store, objlease.SessionOptions{Logger: log})
		if err != nil {
			panic(err)
		}
		w, err := shard.New(sess, prefix, objlease.Options{TTL: ttl}, shard.Config{Member: fmt.Sprintf("m%02d", i), Shards: ids,
			Work: func(ctx context.Context, s *shard.Shard) { <-ctx.Done() }})
		if err != nil {
			panic(err)
		}
		workers = append(workers, w)
		wg.Go(func() { w.Run(ctx) })
	}
	start := time.Now()
	balanced := func() bool {
		total := 0
		for _, w := range workers {
			k := len(w.Owned())
			if k < m/n || k > (m+n-1)/n {
				return false
			}
			total += k
		}
		return total == m
	}
	for !balanced() {
		if time.Since(start) > 3*time.Minute {
			fmt.Fprintln(os.Stderr, "never balanced")
			os.Exit(1)
		}
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(start)
	time.Sleep(settle)
	snap := func() map[string]int64 {
		return map[string]int64{"list": c.list.Load(), "get": c.get.Load(), "head": c.head.Load(), "put": c.put.Load(), "delete": c.del.Load(), "other": c.other.Load()}
	}
	before := snap()
	t0 := time.Now()
	time.Sleep(window)
	after := snap()
	secs := time.Since(t0).Seconds()
	ok := balanced()
	cancel()
	wg.Wait()
	out := map[string]any{"seconds": secs, "balanced_after": took.Seconds(), "still_balanced": 0}
	if ok {
		out["still_balanced"] = 1
	}
	for k := range after {
		out[k] = after[k] - before[k]
	}
	json.NewEncoder(os.Stdout).Encode(out)
}
`

// buildShardBench builds shardBenchSource against the root module at rev
// ("" for this tree) into dir.
func buildShardBench(b *testing.B, rev, dir string) string {
	b.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		b.Fatal(err)
	}
	if rev != "" {
		root = filepath.Join(dir, "src")
		if err := os.MkdirAll(root, 0o755); err != nil {
			b.Fatal(err)
		}
		archive := exec.Command("sh", "-c", `git -C .. archive "$0" | tar -x -C "$1"`, rev, root)
		if out, err := archive.CombinedOutput(); err != nil {
			b.Fatalf("git archive %s: %v\n%s", rev, err, out)
		}
	}
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte(shardBenchSource), 0o644); err != nil {
		b.Fatal(err)
	}
	overlay, err := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(root, "internal", "shardbenchmain", "main.go"): src}})
	if err != nil {
		b.Fatal(err)
	}
	ov := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ov, overlay, 0o644); err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(dir, "shardbench")
	build := exec.Command("go", "build", "-overlay", ov, "-o", bin, "./internal/shardbenchmain")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build at %q: %v\n%s", rev, err, out)
	}
	return bin
}

func BenchmarkShardGroupRequests(b *testing.B) {
	type variant struct{ name, bin string }
	variants := []variant{{"after", buildShardBench(b, "", b.TempDir())}}
	if rev := os.Getenv("OBJLEASE_BENCH_BEFORE"); rev != "" {
		variants = append([]variant{{"before", buildShardBench(b, rev, b.TempDir())}}, variants...)
	}
	ttl := 6 * time.Second
	if v := os.Getenv("OBJLEASE_BENCH_SHARD_TTL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatal(err)
		}
		ttl = d
	}
	sizes := "2x10,10x10,50x10,2x100,10x100,50x100,2x1000,10x1000,50x1000"
	if v := os.Getenv("OBJLEASE_BENCH_SHARD_SIZES"); v != "" {
		sizes = v
	}
	s3 := emulator.VersityGW(b)
	prefix := emulator.Prefix(b)
	for _, size := range strings.Split(sizes, ",") {
		nm := strings.SplitN(size, "x", 2)
		n, _ := strconv.Atoi(nm[0])
		m, _ := strconv.Atoi(nm[1])
		for _, v := range variants {
			b.Run(fmt.Sprintf("N%d/M%d/%s", n, m, v.name), func(b *testing.B) {
				group := fmt.Sprintf("%sshardcost/%s/%dx%d", prefix, v.name, n, m)
				cmd := exec.Command(v.bin, s3.Endpoint, s3.Region, s3.AccessKey, s3.SecretKey, s3.Bucket, group,
					strconv.Itoa(n), strconv.Itoa(m), ttl.String(), (3 * ttl).String(), (3 * ttl).String())
				cmd.Stderr = os.Stderr
				out, err := cmd.Output()
				if err != nil {
					b.Fatalf("%v\n%s", err, out)
				}
				var r map[string]float64
				if err := json.Unmarshal(out, &r); err != nil {
					b.Fatalf("%v: %s", err, out)
				}
				if r["still_balanced"] != 1 {
					b.Errorf("the group was not balanced at the end of the window")
				}
				shardHours := float64(m) * r["seconds"] / 3600
				for _, k := range []string{"list", "get", "head", "put", "delete"} {
					b.ReportMetric(r[k]/shardHours, k+"/shard-h")
				}
				b.ReportMetric((r["list"]+r["get"]+r["head"]+r["put"]+r["delete"])/shardHours, "all/shard-h")
				b.ReportMetric(r["balanced_after"], "s-to-balance")
				b.Logf("%s N=%d M=%d TTL %v: %s", v.name, n, m, ttl, strings.TrimSpace(string(out)))
			})
		}
	}
}
