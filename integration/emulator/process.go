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

// Process is one emulator instance: a child process of the test binary or,
// in container mode, a container on the host's network. Its port (and data)
// stay the same for its whole life, so Restart brings back the same store
// with the same objects.
type Process struct {
	name    string
	argsFor func(port int) []string
	health  string        // URL path polled for readiness
	want200 bool          // health must answer 200, not just any status
	ready   time.Duration // bound on the wait for the first answer
	port    int
	dir     string
	log     logBuffer
	r       runner

	mu   sync.Mutex
	up   bool            // started and not stopped since
	done <-chan struct{} // closed when the running instance has exited
}

// runner runs an emulator's program: as a local process (procRunner) or
// as a container (ctrRunner).
type runner interface {
	// start runs the program with args, or runs it again after stop;
	// the channel is closed when it exits.
	start(args []string) (<-chan struct{}, error)
	// stop ends the program: SIGTERM, SIGKILL after stopGrace. It returns
	// once the program has exited.
	stop()
	// pause freezes every thread of the program until resume, and returns
	// once they are frozen.
	pause()
	resume()
	pid() int
	// logs is what the program wrote that Process.log does not hold.
	logs() string
	// remove releases what the runner holds once the program is stopped
	// for good (a container is removed with its volumes).
	remove()
	// containerID is "" for a local process.
	containerID() string
}

// Name is the emulator's name, for messages.
func (p *Process) Name() string { return p.name }

// Port is the TCP port on 127.0.0.1 the emulator listens on.
func (p *Process) Port() int { return p.port }

// Pid is the emulator's process id (on this machine, also for a container),
// 0 while it is stopped.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.up {
		return 0
	}
	return p.r.pid()
}

// Dir is the emulator's data directory on this machine ("" if it keeps
// data in memory or inside its container).
func (p *Process) Dir() string { return p.dir }

// ContainerID is the id of the emulator's container, "" for a local process.
func (p *Process) ContainerID() string { return p.r.containerID() }

// Log returns what the emulator wrote to stdout and stderr so far (the
// last megabyte of a local process's), across restarts.
func (p *Process) Log() string { return p.log.String() + p.r.logs() }

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
		p.r.remove()
		releasePort(p.port)
		if !errors.Is(err, errExited) {
			return err
		}
	}
	return err
}

// errExited: the emulator exited before it answered.
var errExited = errors.New("exited before it answered")

// run starts the emulator on p.port and waits for readiness.
func (p *Process) run() error {
	done, err := p.begin()
	if err != nil {
		return err
	}
	return p.awaitReady(done)
}

// begin starts the emulator on p.port without waiting for it to answer.
func (p *Process) begin() (<-chan struct{}, error) {
	done, err := p.r.start(p.argsFor(p.port))
	if err != nil {
		return nil, fmt.Errorf("start %s: %w\n%s log:\n%s", p.name, err, p.name, p.Log())
	}
	p.mu.Lock()
	p.up = true
	p.mu.Unlock()
	return done, nil
}

// awaitReady waits until the emulator that begin started answers, and
// stops it if it does not.
func (p *Process) awaitReady(done <-chan struct{}) error {
	if err := p.waitReady(done); err != nil {
		p.Stop()
		return fmt.Errorf("%s on port %d: %w\n%s log:\n%s", p.name, p.port, err, p.name, p.Log())
	}
	return nil
}

// waitReady polls the health URL every 100 ms until it answers.
func (p *Process) waitReady(done <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), p.ready)
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
			return fmt.Errorf("no answer from %s within %v (last: %v)", url, p.ready, err)
		case <-tick.C:
		}
	}
}

// Stop ends the emulator: SIGTERM, SIGKILL if it has not exited after a
// grace period (also if it is paused). Its port stays reserved for Restart.
func (p *Process) Stop() {
	p.mu.Lock()
	up := p.up
	p.up = false
	p.mu.Unlock()
	if up {
		p.r.stop()
	}
}

// Restart starts a stopped emulator again on the same port with the same
// data and waits until it answers. It stops it first if needed.
func (p *Process) Restart(t testing.TB) {
	t.Helper()
	p.Stop()
	if err := p.run(); err != nil {
		t.Fatalf("restart: %v", err)
	}
}

// Pause freezes the emulator (SIGSTOP, or the cgroup freezer for a
// container): connections are accepted by the kernel but nothing answers,
// as with a store that hangs. It returns once the emulator is frozen.
func (p *Process) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.up {
		p.r.pause()
	}
}

// Resume undoes Pause.
func (p *Process) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.up {
		p.r.resume()
	}
}

// stopForGood stops the emulator, removes it and gives its port back.
func (p *Process) stopForGood() {
	p.Stop()
	p.r.remove()
	untrack(p)
	releasePort(p.port)
}

// procRunner runs the emulator as a child process in its own process group.
type procRunner struct {
	name, bin, dir string
	env            []string
	log            *logBuffer

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

func (r *procRunner) start(args []string) (<-chan struct{}, error) {
	cmd := exec.Command(r.bin, args...)
	cmd.Env = append(os.Environ(), r.env...)
	cmd.Dir = r.dir
	if cmd.Dir == "" {
		cmd.Dir = os.TempDir()
	}
	cmd.Stdout = r.log
	cmd.Stderr = r.log
	cmd.SysProcAttr = sysProcAttr()
	// Wait must not hang on output pipes held open by a stray grandchild.
	cmd.WaitDelay = stopGrace
	fmt.Fprintf(r.log, "--- start %s %s\n", r.bin, strings.Join(args, " "))
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(r.log, "--- %s exited: %v\n", r.name, err)
		close(done)
	}()
	r.mu.Lock()
	r.cmd, r.done = cmd, done
	r.mu.Unlock()
	return done, nil
}

func (r *procRunner) stop() {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.cmd = nil
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	pgid := cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	_ = syscall.Kill(-pgid, syscall.SIGCONT) // a paused process cannot act on SIGTERM
	select {
	case <-done:
	case <-time.After(stopGrace):
		fmt.Fprintf(r.log, "--- %s ignored SIGTERM for %v, killing\n", r.name, stopGrace)
	}
	// Also reaps anything the emulator left behind in its group.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-done
}

func (r *procRunner) pause() {
	if pid := r.signal(syscall.SIGSTOP); pid != 0 {
		waitStopped(pid)
	}
}

func (r *procRunner) resume() { r.signal(syscall.SIGCONT) }

// signal sends sig to the emulator's process group and returns the
// emulator's pid, or 0 if it is not running.
func (r *procRunner) signal(sig syscall.Signal) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return 0
	}
	_ = syscall.Kill(-r.cmd.Process.Pid, sig)
	return r.cmd.Process.Pid
}

func (r *procRunner) pid() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return 0
	}
	return r.cmd.Process.Pid
}

func (r *procRunner) logs() string        { return "" }
func (r *procRunner) remove()             {}
func (r *procRunner) containerID() string { return "" }

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
