package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TestMetricsRuntimeAndSeconds scrapes /metrics of a hold: the Go
// runtime's and the process's metrics are there, and the renewal
// histogram's buckets are seconds, its renewals in sub-second ones.
func TestMetricsRuntimeAndSeconds(t *testing.T) {
	url := "file://" + t.TempDir() + "/k"
	s := serve(t, "hold", "--http", "127.0.0.1:0", "--ttl", "300ms", url)
	if tok := s.line(t); tok != "1" {
		t.Fatalf("token %q", tok)
	}
	until(t, "a renewal in /metrics", func() bool {
		_, body, _ := s.get(t, "/metrics")
		return strings.Contains(body, "objlease_lease_renew_duration_seconds_count{")
	})
	_, metrics, _ := s.get(t, "/metrics")
	want := []string{"go_goroutines ", "go_gc_duration_seconds", "go_memstats_heap_alloc_bytes ", "go_info{"}
	if runtime.GOOS == "linux" {
		want = append(want, "process_cpu_seconds_total ", "process_resident_memory_bytes ", "process_open_fds ", "process_start_time_seconds ")
	}
	for _, m := range want {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics has no %q", m)
		}
	}
	// One histogram per outcome; the "ok" one.
	buckets := regexp.MustCompile(`(?m)^objlease_lease_renew_duration_seconds_bucket\{[^}]*le="([^"]+)"[^}]*outcome="ok"[^}]*\} (\d+)$|^objlease_lease_renew_duration_seconds_bucket\{[^}]*outcome="ok"[^}]*le="([^"]+)"[^}]*\} (\d+)$`)
	var les []string
	counts := map[string]int{}
	for _, m := range buckets.FindAllStringSubmatch(metrics, -1) {
		le, n := m[1]+m[3], m[2]+m[4]
		les = append(les, le)
		counts[le], _ = strconv.Atoi(n)
	}
	wantLE := []string{"0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "30", "+Inf"}
	if !slices.Equal(les, wantLE) {
		t.Fatalf("renewal buckets le=%v, want seconds %v:\n%s", les, wantLE, metrics)
	}
	if counts["+Inf"] == 0 || counts["1"] != counts["+Inf"] {
		t.Fatalf("renewals %d in all, %d under a second; want them all under a second:\n%s", counts["+Inf"], counts["1"], metrics)
	}
	if code := s.stop(t); code != 0 {
		t.Fatalf("hold exited %d", code)
	}
}

// receiver is an OTLP/HTTP collector in the test: it decodes what the
// exporters POST to /v1/metrics and /v1/traces.
type receiver struct {
	mu      sync.Mutex
	metrics []*colmetrics.ExportMetricsServiceRequest
	traces  []*coltrace.ExportTraceServiceRequest
	headers []http.Header
	srv     *httptest.Server
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/metrics", func(w http.ResponseWriter, req *http.Request) {
		m := new(colmetrics.ExportMetricsServiceRequest)
		if !decode(t, w, req, m) {
			return
		}
		r.mu.Lock()
		r.metrics, r.headers = append(r.metrics, m), append(r.headers, req.Header)
		r.mu.Unlock()
		reply(w, &colmetrics.ExportMetricsServiceResponse{})
	})
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, req *http.Request) {
		m := new(coltrace.ExportTraceServiceRequest)
		if !decode(t, w, req, m) {
			return
		}
		r.mu.Lock()
		r.traces = append(r.traces, m)
		r.mu.Unlock()
		reply(w, &coltrace.ExportTraceServiceResponse{})
	})
	r.srv = httptest.NewServer(mux)
	t.Cleanup(r.srv.Close)
	return r
}

func decode(t *testing.T, w http.ResponseWriter, req *http.Request, m proto.Message) bool {
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return false
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err == nil && req.Header.Get("Content-Type") != "application/x-protobuf" {
		err = errors.New("content type " + req.Header.Get("Content-Type"))
	}
	if err == nil {
		err = proto.Unmarshal(b, m)
	}
	if err != nil {
		t.Errorf("%s: %v", req.URL.Path, err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

func reply(w http.ResponseWriter, m proto.Message) {
	b, _ := proto.Marshal(m)
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(b)
}

// metricNames are the names of the metrics received, and the resource
// attributes seen, as key=value.
func (r *receiver) received() (metrics, resource map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	metrics, resource = map[string]bool{}, map[string]bool{}
	for _, req := range r.metrics {
		for _, rm := range req.ResourceMetrics {
			for _, a := range rm.GetResource().GetAttributes() {
				resource[a.Key+"="+a.GetValue().GetStringValue()] = true
			}
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					if s := m.GetSum(); s != nil {
						var total int64
						for _, p := range s.DataPoints {
							total += p.GetAsInt()
						}
						metrics[m.Name+"="+strconv.FormatInt(total, 10)] = true
					}
					metrics[m.Name] = true
				}
			}
		}
	}
	return metrics, resource
}

// spans are the names of the spans received, and their parent's name
// ("" for a root).
func (r *receiver) spans() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	byID := map[string]string{}
	parents := map[string]string{}
	for _, req := range r.traces {
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					byID[string(s.SpanId)] = s.Name
					parents[s.Name] = string(s.ParentSpanId)
				}
			}
		}
	}
	out := map[string]string{}
	for name, parent := range parents {
		out[name] = byID[parent]
	}
	return out
}

// runWithEnv runs the CLI binary with env added to its environment and
// returns its exit code and stderr.
func runWithEnv(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(objleaseBin(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), stderr.String()
	case err != nil:
		t.Fatal(err)
	}
	return 0, stderr.String()
}

// TestOTLPExport: a run that ends before any scrape has sent its metrics
// and spans to the collector the OTEL_* variables name by the time it has
// exited.
func TestOTLPExport(t *testing.T) {
	r := newReceiver(t)
	url := "file://" + filepath.Join(t.TempDir(), "leases", "nightly")
	code, stderr := runWithEnv(t, []string{
		"OTEL_METRICS_EXPORTER=otlp",
		"OTEL_TRACES_EXPORTER=otlp",
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + r.srv.URL,
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer%20t0ken",
		"OTEL_SERVICE_NAME=nightly-report",
		"OTEL_RESOURCE_ATTRIBUTES=deployment.environment=test",
		// Never before the process exits: what arrives was flushed then.
		"OTEL_METRIC_EXPORT_INTERVAL=3600000",
	}, "run", url, "--", "true")
	if code != 0 || stderr != "" {
		t.Fatalf("run exited %d: %s", code, stderr)
	}
	metrics, res := r.received()
	for _, m := range []string{"objlease.lease.acquisitions=1", "objlease.lease.held", "objlease.store.requests"} {
		if !metrics[m] {
			t.Errorf("the collector got no %s; got %v", m, metrics)
		}
	}
	for _, a := range []string{"service.name=nightly-report", "deployment.environment=test"} {
		if !res[a] {
			t.Errorf("resource has no %s; got %v", a, res)
		}
	}
	if got := r.headers[0].Get("Authorization"); got != "Bearer t0ken" {
		t.Errorf("Authorization header %q, want OTEL_EXPORTER_OTLP_HEADERS's", got)
	}
	spans := r.spans()
	for name, parent := range map[string]string{"objlease run": "", "objlease.acquire": "objlease run", "objlease.release": "objlease run"} {
		if p, ok := spans[name]; !ok || p != parent {
			t.Errorf("span %q (parent %q): got %v", name, parent, spans)
		}
	}
}

// TestOTLPCollectorUnreachable: a collector that refuses connections, or
// accepts them and never answers, costs a warning, not the command's exit
// status; the wait for it is bounded (here by OTEL_EXPORTER_OTLP_TIMEOUT).
func TestOTLPCollectorUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String()
	ln.Close()
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c) // read nothing, answer nothing
		}
	}()
	dir := t.TempDir()
	for _, tc := range []struct {
		endpoint, warning string
	}{
		{refused, "cannot reach the collector: connection refused"},
		{"http://" + silent.Addr().String(), "no answer from the collector in 300ms"},
	} {
		code, stderr := runWithEnv(t, []string{
			"OTEL_METRICS_EXPORTER=otlp",
			"OTEL_TRACES_EXPORTER=otlp",
			"OTEL_EXPORTER_OTLP_ENDPOINT=" + tc.endpoint,
			"OTEL_EXPORTER_OTLP_TIMEOUT=300",
		}, "run", "file://"+filepath.Join(dir, "k"), "--", "sh", "-c", "exit 3")
		want := "objlease: warning: metrics and spans not exported before exit: " + tc.warning + " (endpoint=" + tc.endpoint + ")\n"
		if code != 3 || stderr != want {
			t.Errorf("collector %s: exit %d, stderr:\n%s\nwant exit 3 and:\n%s", tc.endpoint, code, stderr, want)
		}
	}
}

// TestOTelEnv: what the OTEL_* variables turn on, and what objlease
// refuses rather than lose telemetry silently.
func TestOTelEnv(t *testing.T) {
	for _, tc := range []struct {
		env             map[string]string
		metrics, traces bool
		err             string
	}{
		{env: nil},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}},
		{env: map[string]string{"OTEL_METRICS_EXPORTER": "otlp"}, metrics: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_METRICS_EXPORTER": "none"}, traces: true},
		{env: map[string]string{"OTEL_METRICS_EXPORTER": "otlp,none"}},
		{env: map[string]string{"OTEL_METRICS_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}},
		{env: map[string]string{"OTEL_METRICS_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, metrics: true},
		{env: map[string]string{"OTEL_METRICS_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/protobuf"}, metrics: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}},
		{env: map[string]string{"OTEL_METRICS_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			err: "OTEL_EXPORTER_OTLP_PROTOCOL=grpc: not supported: objlease sends OTLP over HTTP with protobuf only"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"},
			err: "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/json: not supported"},
		{env: map[string]string{"OTEL_METRICS_EXPORTER": "prometheus"},
			err: "OTEL_METRICS_EXPORTER=prometheus: not supported: objlease exports otlp (over HTTP), or none; --http serves the metrics to Prometheus"},
	} {
		cfg, err := readOTelEnv(func(k string) string { return tc.env[k] })
		switch {
		case tc.err != "":
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) || exitCodeOf(err) != exitUsage {
				t.Errorf("%v: %v (exit %d), want %q, exit 64", tc.env, err, exitCodeOf(err), tc.err)
			}
		case err != nil || cfg.metrics != tc.metrics || cfg.traces != tc.traces:
			t.Errorf("%v: metrics %v traces %v err %v, want %v %v", tc.env, cfg.metrics, cfg.traces, err, tc.metrics, tc.traces)
		}
	}
}

// TestOTLPExportOnSignal: hold ended by SIGTERM, its usual end, has
// flushed its metrics and spans by the time it has exited.
func TestOTLPExportOnSignal(t *testing.T) {
	r := newReceiver(t)
	cmd := exec.Command(objleaseBin(t), "hold", "--ttl", "300ms", "file://"+filepath.Join(t.TempDir(), "k"))
	cmd.Env = append(os.Environ(), "OTEL_METRICS_EXPORTER=otlp", "OTEL_TRACES_EXPORTER=otlp",
		"OTEL_EXPORTER_OTLP_ENDPOINT="+r.srv.URL, "OTEL_METRIC_EXPORT_INTERVAL=3600000")
	var stderr bytes.Buffer // read once the process has exited
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	tok, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || tok != "1\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("token %q, %v; stderr:\n%s", tok, err, stderr.String())
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("hold: %v; stderr:\n%s", err, stderr.String())
	}
	metrics, _ := r.received()
	if !metrics["objlease.lease.acquisitions=1"] || !metrics["objlease.lease.held"] {
		t.Errorf("the collector got %v", metrics)
	}
	spans := r.spans()
	for name, parent := range map[string]string{"objlease hold": "", "objlease.acquire": "objlease hold", "objlease.release": "objlease hold"} {
		if p, ok := spans[name]; !ok || p != parent {
			t.Errorf("span %q (parent %q): got %v", name, parent, spans)
		}
	}
}
