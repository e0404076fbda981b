package bench

// This file holds the helper process the failover section kills: the
// holder command it runs, and the bench's side that starts, reads and stops it.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/objlease/objlease/objlease"
)

// holderReport is the line the helper prints once it holds the lease.
type holderReport struct {
	Token     uint64  `json:"token"`
	Reads     int64   `json:"reads"`
	Writes    int64   `json:"writes"`
	AcquireMs float64 `json:"acquire_ms"`
	// LastWriteNs is when the acquiring write was sent (Unix ns).
	LastWriteNs int64 `json:"last_write_ns"`
}

// After its report the holder prints one line per write it made, "w" and
// the Unix time in nanoseconds at which the write was sent, so that the
// bench knows the holder's last write when it kills it.

// Holder is the helper process the failover section starts: it takes the
// lease at --key under the URL, prints a holderReport, then holds the
// lease, renewing it, until its stdin closes (or, with --release, releases
// it at once).
func Holder(ctx context.Context, env Env, args []string) error {
	fs := flag.NewFlagSet("bench holder", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	run := HolderFlags(fs)
	if err := fs.Parse(args); err != nil {
		return usagef("holder: want [flags] --key KEY URL, got %q", args)
	}
	return run(ctx, env, fs.Args())
}

// HolderFlags registers the holder process's flags on fs and returns what
// runs it once fs has parsed them, on the positional arguments (the URL):
// for a command line whose flags are parsed elsewhere (the CLI's).
func HolderFlags(fs *flag.FlagSet) func(ctx context.Context, env Env, pos []string) error {
	key := fs.String("key", "", "lease key")
	var o objlease.Options
	fs.DurationVar(&o.TTL, "ttl", 0, "")
	fs.DurationVar(&o.RenewInterval, "renew", 0, "")
	fs.DurationVar(&o.PollInterval, "poll", 0, "")
	fs.Float64Var(&o.DriftBound, "drift", 0, "")
	storeClock := fs.Bool("store-clock", false, "")
	release := fs.Bool("release", false, "")
	timeout := fs.Duration("timeout", time.Minute, "")
	return func(ctx context.Context, env Env, pos []string) error {
		if len(pos) != 1 || *key == "" {
			return usagef("holder: want [flags] --key KEY URL, got %q", pos)
		}
		o.Holder = fmt.Sprintf("objlease-bench/holder-%d", os.Getpid())
		return holder(ctx, env, pos[0], *key, o, *storeClock, *release, *timeout)
	}
}

func holder(ctx context.Context, env Env, url, key string, o objlease.Options, storeClock, release bool, timeout time.Duration) error {
	if storeClock {
		o.StoreClock = true
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cs, _, err := openCounted(ctx, env.Open, url)
	if err != nil {
		return err
	}
	defer cs.Close()
	var mu sync.Mutex
	var reported bool
	var last time.Time // the acquisition's write, for the report
	cs.wrote = func(sent time.Time) {
		mu.Lock()
		defer mu.Unlock()
		last = sent
		if reported {
			fmt.Fprintf(env.Stdout, "w %d\n", sent.UnixNano())
		}
	}
	sess, err := objlease.NewSession(cs, objlease.SessionOptions{Logger: env.Log})
	if err != nil {
		return err
	}
	cl, err := sess.Client(key, o)
	if err != nil {
		return err
	}
	start := time.Now()
	l, err := cl.Acquire(ctx)
	if err != nil {
		return err
	}
	n := cs.counts()
	mu.Lock()
	reported = true
	err = json.NewEncoder(env.Stdout).Encode(holderReport{Token: l.Token(), Reads: n.reads(), Writes: n.writes(), AcquireMs: ms(time.Since(start)), LastWriteNs: last.UnixNano()})
	mu.Unlock()
	if err != nil {
		return err
	}
	if !release {
		eof := make(chan struct{})
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			close(eof)
		}()
		select {
		case <-eof:
		case <-l.Done():
			// Lost while holding (its renewals failed): the bench must not
			// count a takeover after this as two holders at once.
			fmt.Fprintln(env.Stdout, "lost")
		}
	}
	rctx, rcancel := context.WithTimeout(context.Background(), o.TTL)
	defer rcancel()
	return l.Release(rctx)
}

// holderProc is a running helper process.
type holderProc struct {
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	line      chan holderLine
	lost      chan struct{} // closed when the helper says it lost its lease
	eof       chan struct{} // closed when its stdout is read to the end
	lastWrite atomic.Int64  // when its latest write was sent, Unix ns
}

type holderLine struct {
	r   holderReport
	err error
}

// startHolder starts a helper process that takes the lease at key.
func (b *bench) startHolder(key string, flags ...string) (*holderProc, error) {
	if len(b.env.Holder) == 0 {
		return nil, errors.New("no holder command to start")
	}
	exe := b.env.Holder[0]
	args := append(append(slices.Clone(b.env.Holder[1:]), "--key", key, "--ttl", b.ttl.String(), "--renew", b.renew.String(),
		"--poll", b.poll.String(), "--drift", strconv.FormatFloat(b.drift, 'g', -1, 64),
		"--timeout", (10*b.ttl+time.Minute).String()), flags...)
	cmd := exec.Command(exe, append(args, b.url)...)
	cmd.Stderr = b.env.Stderr
	p := &holderProc{cmd: cmd, line: make(chan holderLine, 1), lost: make(chan struct{}), eof: make(chan struct{})}
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting a holder process: %w", err)
	}
	go func() {
		defer close(p.eof)
		var l holderLine
		r := bufio.NewReader(out)
		s, err := r.ReadString('\n')
		if err == nil {
			err = json.Unmarshal([]byte(s), &l.r)
		}
		if err != nil {
			l.err = fmt.Errorf("holder process for %q printed %q: %w", key, s, err)
		}
		p.lastWrite.Store(l.r.LastWriteNs)
		p.line <- l
		for l.err == nil {
			s, err := r.ReadString('\n')
			if err != nil {
				break
			}
			var ns int64
			if _, err := fmt.Sscanf(s, "w %d\n", &ns); err == nil {
				p.lastWrite.Store(ns)
			} else if s == "lost\n" {
				close(p.lost)
			}
		}
		_, _ = io.Copy(io.Discard, r)
	}()
	return p, nil
}

// ready waits until the helper holds its lease.
func (p *holderProc) ready(ctx context.Context) (holderReport, error) {
	select {
	case l := <-p.line:
		if l.err != nil {
			p.kill()
		}
		return l.r, l.err
	case <-ctx.Done():
		p.kill()
		return holderReport{}, context.Cause(ctx)
	}
}

// kill ends the helper with SIGKILL, as a crash would.
func (p *holderProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.eof // every write it reported, before Wait closes the pipe
	_ = p.cmd.Wait()
}

// finish waits for a helper that exits on its own.
func (p *holderProc) finish() error {
	_ = p.stdin.Close()
	<-p.eof
	return p.cmd.Wait()
}
