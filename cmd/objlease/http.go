package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/providers"
)

// addHTTP registers --http on a long-running command. The name is not
// --listen because elect --listen already means "watch the leader".
func addHTTP(fs *flagSet) *string {
	addr := fs.String("http", "", "serve /healthz, /readyz, /state (JSON) and /metrics (Prometheus) on `ADDR` (host:port, :9090, 127.0.0.1:0 for any free port) while the command runs")
	fs.checks = append(fs.checks, func() error {
		if !fs.isSet("http") {
			return nil
		}
		return checkHTTPAddr(*addr)
	})
	return addr
}

// checkHTTPAddr refuses an --http value that is not an address to listen
// on, saying what the flag takes: an empty one (an unset $PORT) would
// serve nothing, silently.
func checkHTTPAddr(addr string) error {
	const want = "want host:port or :PORT to listen on (:9090, 127.0.0.1:9090, 127.0.0.1:0 for any free port)"
	if addr == "" {
		return errors.New("--http is empty (an unset variable?): " + want + ", or leave the flag out")
	}
	if _, port, err := net.SplitHostPort(addr); err == nil && port != "" {
		return nil
	}
	if _, err := strconv.ParseUint(addr, 10, 16); err == nil {
		return fmt.Errorf("--http %s: a port alone is :%s; %s", addr, addr, want)
	}
	if u, err := url.Parse(addr); err == nil && u.Scheme != "" && u.Host != "" {
		return fmt.Errorf("--http %s: a URL, not an address: give %s (%s)", addr, u.Host, want)
	}
	return fmt.Errorf("--http %s: %s", addr, want)
}

// serveOneURL registers --http on a long-running command that takes one
// URL, and returns the action that reads the URL, serves --http for the
// command's whole run and runs run.
func (c *cli) serveOneURL(fs *flagSet, command string, run func(ctx context.Context, url string) error) action {
	httpAddr := addHTTP(fs)
	return fs.withURL(func(ctx context.Context, url string) error {
		stop, err := c.serveHTTP(*httpAddr, command, url)
		if err != nil {
			return err
		}
		defer stop()
		return run(ctx, url)
	})
}

// probe is what --http serves: the command's state as the command sets
// it, and the outcome of its last store request.
type probe struct {
	mu      sync.Mutex
	command string
	url     string
	// lease is the lease this process holds (hold, run, elect while
	// leading); nil when it holds none.
	lease *objlease.Lease
	// holder and token: who holds the lease as last seen, another
	// process while this one waits or follows.
	holder string
	token  uint64
	// ready, when set, says whether the command is ready and if not why,
	// called with mu held; nil: ready while lease is held.
	ready func(p *probe) (bool, string)
	// shards lists the shards this member owns (group join), and ending
	// those whose lease ended while their command has not exited yet.
	shards, ending func() []string
	// polled: watch's last read of the store succeeded.
	polled bool
	// storeErr is the last store request's error, nil if it succeeded.
	storeErr error
	// pending are the store requests in flight.
	pending  map[*request]struct{}
	stopping bool
}

// request is a store request in flight.
type request struct {
	op, key string
	start   time.Time
}

// slowRequest is how long a store request goes unanswered before /state
// reports it: a renewal that hangs has no error to show until its context
// ends, at the end of the lease's validity.
const slowRequest = time.Second

// state is /state's document. Every key is always present.
type state struct {
	Command    string     `json:"command"`
	URL        string     `json:"url"`
	Healthy    bool       `json:"healthy"`
	Ready      bool       `json:"ready"`
	Reason     string     `json:"reason"` // why not healthy or not ready; "" when both
	Held       bool       `json:"held"`   // this process holds the lease
	Holder     string     `json:"holder"` // who holds it, as last seen ("" none known)
	Token      uint64     `json:"token"`
	Expires    *time.Time `json:"expires"` // when this process's hold ends unless renewed; null if not held
	Renewed    *time.Time `json:"renewed"` // when the last write of the lease that succeeded was sent; null if not held
	Overdue    bool       `json:"renewal_overdue"`
	Shards     []string   `json:"shards"`   // group join: the shards this member owns (their leases valid now)
	Stopping   []string   `json:"stopping"` // group join: shards whose lease ended, their command not exited yet
	StoreError string     `json:"store_error"`
}

func (p *probe) snapshot() state {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := state{Command: p.command, URL: p.url, Holder: p.holder, Token: p.token, Shards: []string{}, Stopping: []string{}}
	// Held is the lease's validity now, not whether its end has been
	// noticed: a process resumed after a pause past its validity answers
	// before the lease's watcher wakes (ValidFor ends the lease then).
	if l := p.lease; l != nil {
		if left := l.ValidFor(); left > 0 {
			rec := l.Record()
			s.Held, s.Holder, s.Token = true, rec.Holder, rec.Token
			t := time.Now().Add(left).UTC()
			s.Expires, s.Renewed = &t, &rec.WrittenAt
			// The command renews every TTL/3: less validity left than that
			// means the renewal due a third of the TTL after the last one
			// has gone without success for about as long again.
			s.Overdue = left < time.Duration(rec.TTLMillis)*time.Millisecond/3
		}
	}
	if p.shards != nil {
		s.Shards = append(s.Shards, p.shards()...)
	}
	if p.ending != nil {
		s.Stopping = append(s.Stopping, p.ending()...)
	}
	if p.storeErr != nil {
		s.StoreError = describe(p.storeErr)
	}
	if r := p.oldest(); r != nil {
		if waited := time.Since(r.start); waited >= slowRequest {
			s.StoreError = fmt.Sprintf("%s %q: no answer from the store for %v so far", r.op, r.key, roundDuration(waited))
		}
	}
	s.Healthy = true
	switch {
	case p.stopping:
		s.Healthy, s.Reason = false, "shutting down"
	case p.storeErr != nil && permanent(p.storeErr):
		s.Healthy, s.Reason = false, "store: "+describe(p.storeErr)
	}
	ready, why := s.Held, "the lease is not held"
	switch l := p.lease; {
	case s.Held:
	case l != nil && l.Err() != nil && p.holder == l.Record().Holder && p.token == l.Token():
		// The last holder seen is this process, whose lease has ended.
		why = "the lease is no longer held: " + reason(l.Err(), "")
	case p.holder != "":
		why = fmt.Sprintf("the lease is held by %s (token %d)", showHolder(p.holder), p.token)
	}
	if p.ready != nil {
		ready, why = p.ready(p)
	}
	s.Ready = ready && s.Healthy
	if s.Healthy && !ready {
		s.Reason = why
	}
	return s
}

func (p *probe) set(f func(p *probe)) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	f(p)
}

// stored records the outcome of a store request. Outcomes that are
// answers (not found, a precondition that failed) are no failure.
func (p *probe) stored(err error) {
	if errors.Is(err, providers.ErrNotFound) || errors.Is(err, providers.ErrPrecondition) ||
		errors.Is(err, providers.ErrConflict) {
		err = nil
	}
	p.set(func(p *probe) { p.storeErr = err })
}

// begin records a store request sent; end its outcome.
func (p *probe) begin(op, key string) *request {
	r := &request{op: op, key: key, start: time.Now()}
	p.set(func(p *probe) {
		if p.pending == nil {
			p.pending = map[*request]struct{}{}
		}
		p.pending[r] = struct{}{}
	})
	return r
}

// end records the outcome of r (see stored). A request this process cut
// short (a renewal whose lease's validity ended, a command interrupted)
// tells nothing of the store, unless it had gone unanswered for
// slowRequest: it is then the failure to show, since the store never
// answered it.
func (p *probe) end(r *request, err error) {
	p.set(func(p *probe) { delete(p.pending, r) })
	if errors.Is(err, context.Canceled) {
		if waited := time.Since(r.start); waited >= slowRequest {
			err = fmt.Errorf("%s %q: no answer from the store in %v; the request was given up", r.op, r.key, roundDuration(waited))
			p.set(func(p *probe) { p.storeErr = err })
		}
		return
	}
	p.stored(err)
}

// oldest returns the store request longest in flight, or nil (p.mu held).
func (p *probe) oldest() *request {
	var o *request
	for r := range p.pending {
		if o == nil || r.start.Before(o.start) {
			o = r
		}
	}
	return o
}

func (p *probe) handler(reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		s := p.snapshot()
		if !s.Healthy {
			plain(w, http.StatusServiceUnavailable, s.Reason)
			return
		}
		plain(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		s := p.snapshot()
		switch {
		case !s.Ready:
			plain(w, http.StatusServiceUnavailable, s.Reason)
		case s.Command == "group join":
			b, _ := json.Marshal(s.Shards)
			plain(w, http.StatusOK, "ok shards="+string(b))
		default:
			plain(w, http.StatusOK, "ok")
		}
	})
	mux.HandleFunc("GET /state", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		b, _ := json.Marshal(p.snapshot())
		w.Write(append(b, '\n'))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}

func plain(w http.ResponseWriter, code int, line string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	fmt.Fprintln(w, line)
}

// serveHTTP starts --http's server for command at url, before the command
// opens its store, serving the metrics of the command's telemetry (see
// traced). The returned stop shuts it down. With no address it does
// nothing.
func (c *cli) serveHTTP(addr, command, url string) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		// A usage error (64), not 78, which says the store is not set up
		// as the URL says.
		return nil, usagef("--http %s: cannot listen there: %s", addr, listenReason(err))
	}
	// The command's telemetry has the registry when --http is given;
	// for a command run other than through dispatch it is made here.
	t, own := c.tel, (*telemetry)(nil)
	if t == nil || t.reg == nil {
		if own, err = c.startTelemetry(context.Background(), true); err != nil {
			ln.Close()
			return nil, err
		}
		t = own
	}
	c.probe = &probe{command: command, url: url}
	srv := &http.Server{Handler: c.probe.handler(t.reg), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	if _, port, _ := net.SplitHostPort(addr); port == "0" || c.verbose {
		c.say("serving health and metrics on http://" + ln.Addr().String())
	}
	return func() {
		c.probe.set(func(p *probe) { p.stopping = true })
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		own.shutdown(c)
	}, nil
}

// listenReason is a listen error without the Go words around it:
// "address already in use", "cannot assign requested address".
func listenReason(err error) string {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		err = oe.Err
		if u, ok := err.(interface{ Unwrap() error }); ok && u.Unwrap() != nil {
			err = u.Unwrap() // *os.SyscallError: the errno
		}
	}
	return err.Error()
}

// observed is a store whose requests' outcomes go to the probe.
type observed struct {
	providers.Store
	p *probe
}

func (o observed) Get(ctx context.Context, key string, maxBytes int64) (*providers.Object, error) {
	r := o.p.begin("get", key)
	obj, err := o.Store.Get(ctx, key, maxBytes)
	o.p.end(r, err)
	return obj, err
}

func (o observed) Stat(ctx context.Context, key string) (*providers.Attrs, error) {
	r := o.p.begin("stat", key)
	a, err := o.Store.Stat(ctx, key)
	o.p.end(r, err)
	return a, err
}

func (o observed) Create(ctx context.Context, key string, data []byte, metadata map[string]string) (providers.WriteResult, error) {
	req := o.p.begin("create", key)
	r, err := o.Store.Create(ctx, key, data, metadata)
	o.p.end(req, err)
	return r, err
}

func (o observed) Replace(ctx context.Context, key string, data []byte, metadata map[string]string, ifVersion string) (providers.WriteResult, error) {
	req := o.p.begin("replace", key)
	r, err := o.Store.Replace(ctx, key, data, metadata, ifVersion)
	o.p.end(req, err)
	return r, err
}

func (o observed) Delete(ctx context.Context, key string, ifVersion string) error {
	r := o.p.begin("delete", key)
	err := o.Store.Delete(ctx, key, ifVersion)
	o.p.end(r, err)
	return err
}

func (o observed) List(ctx context.Context, prefix, pageToken string, pageSize int) (providers.ListPage, error) {
	r := o.p.begin("list", prefix)
	page, err := o.Store.List(ctx, prefix, pageToken, pageSize)
	o.p.end(r, err)
	return page, err
}
