package shard_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/shard"
	"github.com/objlease/objlease/providers"
	_ "github.com/objlease/objlease/providers/all"
)

// counting counts the requests a worker process sends.
type counting struct {
	providers.Store
	n atomic.Int64
}

func (c *counting) Get(ctx context.Context, k string, m int64) (*providers.Object, error) {
	c.n.Add(1)
	return c.Store.Get(ctx, k, m)
}
func (c *counting) Stat(ctx context.Context, k string) (*providers.Attrs, error) {
	c.n.Add(1)
	return c.Store.Stat(ctx, k)
}
func (c *counting) Create(ctx context.Context, k string, d []byte, md map[string]string) (providers.WriteResult, error) {
	c.n.Add(1)
	return c.Store.Create(ctx, k, d, md)
}
func (c *counting) Replace(ctx context.Context, k string, d []byte, md map[string]string, v string) (providers.WriteResult, error) {
	c.n.Add(1)
	return c.Store.Replace(ctx, k, d, md, v)
}
func (c *counting) Delete(ctx context.Context, k, v string) error {
	c.n.Add(1)
	return c.Store.Delete(ctx, k, v)
}
func (c *counting) List(ctx context.Context, p, t string, n int) (providers.ListPage, error) {
	c.n.Add(1)
	return c.Store.List(ctx, p, t, n)
}

// benchTTL is the leases' TTL: SHARD_BENCH_TTL, default 2s (GCS, which
// allows one write per second to an object, needs 6s or more).
var benchTTL = func() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("SHARD_BENCH_TTL")); err == nil {
		return d
	}
	return 2 * time.Second
}()

// benchRound is the round interval: SHARD_BENCH_ROUND, default 200ms.
func benchRound() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("SHARD_BENCH_ROUND")); err == nil {
		return d
	}
	return 200 * time.Millisecond
}

func benchShards(m int) []string {
	ids := make([]string, m)
	for i := range ids {
		ids[i] = fmt.Sprintf("p%02d", i)
	}
	return ids
}

// TestWorkerProcess is a worker process of TestProcessBench; it does
// nothing unless that test started it.
func TestWorkerProcess(t *testing.T) {
	url, name := os.Getenv("SHARD_BENCH_URL"), os.Getenv("SHARD_BENCH_MEMBER")
	if url == "" {
		return
	}
	m, _ := strconv.Atoi(os.Getenv("SHARD_BENCH_M"))
	round := benchRound()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	b, prefix, err := providers.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	store := &counting{Store: b}
	sess, err := objlease.NewSession(store, objlease.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := shard.New(sess, prefix, objlease.Options{TTL: benchTTL, PollInterval: round}, shard.Config{Member: name, Shards: benchShards(m),
		Work: func(ctx context.Context, s *shard.Shard) { <-ctx.Done() }})
	if err != nil {
		t.Fatal(err)
	}
	w.Run(ctx)
	fmt.Printf("requests %d\n", store.n.Load())
}

// TestProcessBench measures a group of worker processes on a real store:
// SHARD_BENCH=URL (a prefix, e.g. file:///tmp/g/) runs it.
func TestProcessBench(t *testing.T) {
	url := os.Getenv("SHARD_BENCH")
	if url == "" || os.Getenv("SHARD_BENCH_URL") != "" {
		t.Skip("set SHARD_BENCH=PREFIX-URL to run")
	}
	const m = 12
	ctx := context.Background()
	b, prefix, err := providers.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	type proc struct {
		cmd *exec.Cmd
		out *bufio.Scanner
	}
	procs := map[string]*proc{}
	spawn := func(name string) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestWorkerProcess$", "-test.v=false")
		cmd.Env = append(os.Environ(), "SHARD_BENCH_URL="+url, "SHARD_BENCH_MEMBER="+name, "SHARD_BENCH_M="+strconv.Itoa(m))
		cmd.Stderr = os.Stderr // a worker that fails says why
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs[name] = &proc{cmd, bufio.NewScanner(out)}
	}
	owners := func() map[string]string {
		v, err := shard.Describe(ctx, b, prefix)
		if err != nil {
			t.Fatal(err)
		}
		o := map[string]string{}
		for _, e := range v.Shards {
			if e.Record.State == objlease.StateHeld {
				o[e.Name] = fmt.Sprintf("%s#%d", e.Record.Holder, e.Record.Token)
			}
		}
		return o
	}
	// balance waits until the live members own every shard, each
	// floor or ceil; it returns the time it took and how many shards
	// changed owner (token) meanwhile.
	balance := func(live []string) (time.Duration, int) {
		start, before := time.Now(), owners()
		for time.Since(start) < time.Minute {
			o := owners()
			count := map[string]int{}
			for _, h := range o {
				count[h[:len(h)-len(h[lastHash(h):])]]++
			}
			ok := len(o) == m
			for _, n := range live {
				if c := count[n]; c < m/len(live) || c > (m+len(live)-1)/len(live) {
					ok = false
				}
			}
			if ok {
				took := time.Since(start)
				time.Sleep(3 * benchTTL) // moves still under way would show
				moved := 0
				for id, h := range owners() {
					if before[id] != h {
						moved++
					}
				}
				return took, moved
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("not balanced among %v within a minute", live)
		return 0, 0
	}
	live := []string{"w1", "w2", "w3"}
	for _, n := range live {
		spawn(n)
	}
	took, _ := balance(live)
	t.Logf("start, 3 workers: balanced after %v", took)
	quietStart := time.Now()
	time.Sleep(10 * time.Second)
	_, quietMoves := balance(live)
	t.Logf("quiet %v: %d shards moved", time.Since(quietStart).Round(time.Second), quietMoves)

	spawn("w4")
	live = append(live, "w4")
	took, moved := balance(live)
	t.Logf("join 3→4: balanced after %v, %d shards moved", took, moved)

	procs["w4"].cmd.Process.Signal(syscall.SIGTERM)
	procs["w4"].cmd.Wait()
	live = live[:3]
	took, moved = balance(live)
	t.Logf("graceful leave 4→3: balanced after %v, %d shards moved", took, moved)

	procs["w3"].cmd.Process.Kill()
	procs["w3"].cmd.Wait()
	delete(procs, "w3")
	live = live[:2]
	took, moved = balance(live)
	t.Logf("kill -9 3→2: balanced after %v (TTL %v), %d shards moved", took, benchTTL, moved)

	// Requests per shard-hour in a quiet, balanced group: count the
	// survivors' requests over a quiet minute.
	var total int64
	elapsed := time.Since(quietStart)
	names := []string{}
	for n := range procs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := procs[n]
		if p.cmd.ProcessState != nil {
			continue
		}
		p.cmd.Process.Signal(syscall.SIGTERM)
		for p.out.Scan() {
			var r int64
			if _, err := fmt.Sscanf(p.out.Text(), "requests %d", &r); err == nil {
				total += r
			}
		}
		p.cmd.Wait()
	}
	t.Logf("survivors sent %d requests in %v: %.0f requests per shard-hour (M=%d, TTL %v, round %v)",
		total, elapsed.Round(time.Second), float64(total)/elapsed.Hours()/m, m, benchTTL, benchRound())
}

func lastHash(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '#' {
			return i
		}
	}
	return len(s)
}
