package emulator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	// readyTimeout bounds how long an emulator may take to answer after it
	// was started; Azurite, the slowest, needs 2–3 s.
	readyTimeout = 60 * time.Second
	// stopGrace is how long Stop waits after SIGTERM before SIGKILL.
	stopGrace = 10 * time.Second
	// bindAttempts: a free port can be taken by someone else between our
	// probe and the emulator's bind; start over on a fresh port that often.
	bindAttempts = 3
)

// Process is one emulator running as a child process of the test binary.
// Its port and data directory stay the same for its whole life, so Restart
// brings back the same store with the same objects.
type Process struct {
	name    string
	bin     string
	argsFor func(port int) []string
	env     []string
	health  string // URL path polled for readiness
	want200 bool   // health must answer 200, not just any status
	port    int
	dir     string
	log     logBuffer

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// Name is the emulator's name, for messages.
func (p *Process) Name() string { return p.name }

// Port is the TCP port on 127.0.0.1 the emulator listens on.
func (p *Process) Port() int { return p.port }

// Pid is the emulator's process id, 0 while it is stopped.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Dir is the emulator's data directory ("" if it keeps data in memory).
func (p *Process) Dir() string { return p.dir }

// Log returns what the emulator wrote to stdout and stderr so far (the
// last megabyte), across restarts.
func (p *Process) Log() string { return p.log.String() }

// start runs the emulator on a fresh free port and waits until it answers,
// retrying on a fresh port if it dies early (another process won the port).
func (p *Process) start() error {
	var err error
	for range bindAttempts {
		p.port, err = reservePort()
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		if err = p.run(); err == nil {
			track(p)
			return nil
		}
		releasePort(p.port)
		if !errors.Is(err, errExited) {
			return err
		}
	}
	return err
}

// errExited: the emulator exited before it answered.
var errExited = errors.New("exited before it answered")

// run starts the process on p.port and waits for readiness.
func (p *Process) run() error {
	cmd := exec.Command(p.bin, p.argsFor(p.port)...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Dir = p.dir
	if cmd.Dir == "" {
		cmd.Dir = os.TempDir()
	}
	cmd.Stdout = &p.log
	cmd.Stderr = &p.log
	cmd.SysProcAttr = sysProcAttr()
	// Wait must not hang on output pipes held open by a stray grandchild.
	cmd.WaitDelay = stopGrace
	fmt.Fprintf(&p.log, "--- start %s %s\n", p.bin, strings.Join(cmd.Args[1:], " "))
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(&p.log, "--- %s exited: %v\n", p.name, err)
		close(done)
	}()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()

	if err := p.waitReady(done); err != nil {
		p.Stop()
		return fmt.Errorf("%s on port %d: %w\n%s log:\n%s", p.name, p.port, err, p.name, p.Log())
	}
	return nil
}

// waitReady polls the health URL every 100 ms until it answers.
func (p *Process) waitReady(done <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	url := fmt.Sprintf("http://127.0.0.1:%d%s", p.port, p.health)
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if !p.want200 || resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-done:
			return errExited
		case <-ctx.Done():
			return fmt.Errorf("no answer from %s within %v (last: %v)", url, readyTimeout, err)
		case <-tick.C:
		}
	}
}

// Stop ends the emulator: SIGTERM to its process group, SIGKILL if it has
// not exited after a grace period. Its port stays reserved for Restart.
func (p *Process) Stop() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	pgid := cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	_ = syscall.Kill(-pgid, syscall.SIGCONT) // a paused process cannot act on SIGTERM
	select {
	case <-done:
	case <-time.After(stopGrace):
		fmt.Fprintf(&p.log, "--- %s ignored SIGTERM for %v, killing\n", p.name, stopGrace)
	}
	// Also reaps anything the emulator left behind in its group.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-done
}

// Restart starts a stopped emulator again on the same port with the same
// data directory and waits until it answers. It stops it first if needed.
func (p *Process) Restart(t testing.TB) {
	t.Helper()
	p.Stop()
	if err := p.run(); err != nil {
		t.Fatalf("restart: %v", err)
	}
}

// Pause stops the emulator with SIGSTOP: connections are accepted by the
// kernel but nothing answers, as with a store that hangs. It returns once
// the emulator has stopped.
func (p *Process) Pause() {
	if pid := p.signal(syscall.SIGSTOP); pid != 0 {
		waitStopped(pid)
	}
}

// Resume undoes Pause with SIGCONT.
func (p *Process) Resume() { p.signal(syscall.SIGCONT) }

// signal sends sig to the emulator's process group and returns the
// emulator's pid, or 0 if it is not running.
func (p *Process) signal(sig syscall.Signal) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	return p.cmd.Process.Pid
}

// stopForGood stops the emulator and gives its port back.
func (p *Process) stopForGood() {
	p.Stop()
	untrack(p)
	releasePort(p.port)
}

// Every Process started and not yet stopped for good, for StopAll.
var (
	liveMu sync.Mutex
	live   = map[*Process]bool{}
)

func track(p *Process)   { liveMu.Lock(); live[p] = true; liveMu.Unlock() }
func untrack(p *Process) { liveMu.Lock(); delete(live, p); liveMu.Unlock() }

func stopLive() {
	liveMu.Lock()
	ps := make([]*Process, 0, len(live))
	for p := range live {
		ps = append(ps, p)
	}
	liveMu.Unlock()
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Go(p.stopForGood)
	}
	wg.Wait()
}

// Ports handed to emulators, so that a stopped emulator's port is not given
// to another one before it restarts. The kernel may still hand it to
// someone else; that is rare and makes Restart fail loudly.
var (
	portsMu sync.Mutex
	ports   = map[int]bool{}
)

// reservePort finds a free TCP port on 127.0.0.1 that no other emulator of
// this test binary holds.
func reservePort() (int, error) {
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("find a free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		portsMu.Lock()
		taken := ports[port]
		ports[port] = true
		portsMu.Unlock()
		if !taken {
			return port, nil
		}
	}
	return 0, errors.New("find a free port: every port offered is held by another emulator")
}

func releasePort(port int) {
	portsMu.Lock()
	delete(ports, port)
	portsMu.Unlock()
}

// logBuffer keeps the last logLimit bytes written to it; safe for
// concurrent use (stdout and stderr are copied by separate goroutines).
type logBuffer struct {
	mu  sync.Mutex
	buf []byte
}

const logLimit = 1 << 20

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - logLimit; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
