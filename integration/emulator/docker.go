package emulator

// Container mode: with OBJLEASE_EMULATORS=docker, versitygw, fake-gcs-server
// and Azurite, shared and private instances alike, run as containers of the
// pinned images (testcontainers-go). s3rver has no official image and stays
// a local process.
//
// Every container uses the host's network and listens on a loopback port
// given on its command line, as the local process would: the tests reach
// both the same way, and a stopped container restarts on the same port.
// Stop and Restart are the container's stop and start (its filesystem, and
// so the store's data, survives); Pause is the engine's pause (the cgroup
// freezer).
//
// Cleanup: StopAll and each private instance's test cleanup remove the
// containers. For the exits that run neither (a panic, -timeout, SIGKILL),
// the test binary starts a reaper: a copy of itself in its own process
// group that waits for the test binary's end (the end of a pipe) and then
// removes every container labelled with this test binary's session. It
// replaces testcontainers' Ryuk, whose image would have to be pulled.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
)

// Pinned images: the same versions scripts/install-emulators.sh installs.
// scripts/containers.sh builds images under these names where none can be
// pulled.
const (
	versityGWImage = "versity/versitygw:v1.8.0"
	fakeGCSImage   = "fsouza/fake-gcs-server:1.56.1"
	azuriteImage   = "mcr.microsoft.com/azure-storage/azurite:3.37.0"
	// MinIO tags its images by release date, not by the pseudo-version the
	// module proxy serves; this name is for the local build of the pinned
	// version (scripts/containers.sh), never pulled.
	minioImage = "objlease/minio:v0.0.0-20260212201848-7aac2a2c5b7c"
)

// Labels on every container the harness starts.
const (
	sessionLabel  = "org.objlease.emulator.session"
	emulatorLabel = "org.objlease.emulator"
)

// engineTimeout bounds one call to the engine other than creating a
// container (which may pull an image: containerTimeout).
const (
	engineTimeout    = time.Minute
	containerTimeout = 10 * time.Minute
)

var (
	dockerOnce sync.Once
	dockerCli  *testcontainers.DockerClient
	dockerErr  error
	session    string // this test binary's containers carry it in sessionLabel
)

// useDocker reports whether the emulators that have an image run as
// containers. If OBJLEASE_EMULATORS=docker but no engine answers, it
// returns an *engineError: such tests fail in CI and skip elsewhere, and
// never fall back to local processes.
func useDocker() (bool, error) {
	if os.Getenv("OBJLEASE_EMULATORS") != "docker" {
		return false, nil
	}
	dockerOnce.Do(connectDocker)
	return dockerErr == nil, dockerErr
}

// engineError: container mode is asked for and no engine answers.
type engineError struct{ err error }

func (e *engineError) Error() string {
	return fmt.Sprintf("OBJLEASE_EMULATORS=docker but no Docker engine answers (DOCKER_HOST=%q): %v; start one, e.g. with eval \"$(./scripts/containers.sh up)\"",
		os.Getenv("DOCKER_HOST"), e.err)
}

func (e *engineError) Unwrap() error { return e.err }

func connectDocker() {
	// The reaper below takes Ryuk's place.
	if os.Getenv("TESTCONTAINERS_RYUK_DISABLED") == "" {
		os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	}
	// testcontainers' messages that belong to no container (which engine,
	// which version) stay out of the test output; each container's go to
	// its emulator's log.
	tclog.SetDefault(logTo{&engineLog})
	cli, err := dialEngine()
	if err != nil {
		dockerErr = err
		return
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		dockerErr = err
		return
	}
	dockerCli, session = cli, hex.EncodeToString(b[:])
	if err := startReaper(); err != nil {
		dockerErr = fmt.Errorf("container mode: start the reaper: %w", err)
	}
}

// engineLog holds testcontainers' messages that belong to no container.
var engineLog logBuffer

// dialEngine connects to the engine testcontainers finds (DOCKER_HOST,
// ~/.testcontainers.properties, the default socket), or returns an
// *engineError.
func dialEngine() (*testcontainers.DockerClient, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx) // fails unless the engine answers
	if err != nil {
		return nil, &engineError{err}
	}
	return cli, nil
}

// ctrRunner runs an emulator as a container on the host's network.
type ctrRunner struct {
	name, image string
	env         map[string]string
	log         *logBuffer

	mu         sync.Mutex
	c          *testcontainers.DockerContainer
	paused     bool
	cancelWait context.CancelFunc
}

func newCtrRunner(name, image string, env []string, log *logBuffer) *ctrRunner {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return &ctrRunner{name: name, image: image, env: m, log: log}
}

// start creates and starts the container the first time, and starts the
// same container (same command line, same filesystem) after stop.
func (r *ctrRunner) start(args []string) (<-chan struct{}, error) {
	ctx, cancel := context.WithTimeout(context.Background(), containerTimeout)
	defer cancel()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c == nil {
		fmt.Fprintf(r.log, "--- run %s %s\n", r.image, strings.Join(args, " "))
		c, err := testcontainers.Run(ctx, r.image,
			testcontainers.WithLogger(logTo{r.log}),
			testcontainers.WithCmd(args...),
			testcontainers.WithEnv(r.env),
			testcontainers.WithLabels(map[string]string{sessionLabel: session, emulatorLabel: r.name}),
			// Tests may only talk to loopback addresses: the emulator
			// listens on 127.0.0.1 of the host, as a local process would.
			testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
				hc.NetworkMode = "host"
			}),
		)
		if c != nil {
			r.c = c // even if it failed to start: remove must remove it
		}
		if err != nil {
			return nil, fmt.Errorf("container %s (run ./scripts/containers.sh images if it is missing): %w", r.image, err)
		}
	} else {
		fmt.Fprintf(r.log, "--- start container %s again\n", shortID(r.c.GetContainerID()))
		if err := r.c.Start(ctx); err != nil {
			return nil, fmt.Errorf("container %s: %w", r.image, err)
		}
	}
	return r.watchExit(), nil
}

// watchExit returns a channel closed when the container stops running.
func (r *ctrRunner) watchExit() <-chan struct{} {
	ctx, cancel := context.WithCancel(context.Background())
	if r.cancelWait != nil {
		r.cancelWait()
	}
	r.cancelWait = cancel
	res := dockerCli.ContainerWait(ctx, r.c.GetContainerID(), client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	done := make(chan struct{})
	go func() {
		select {
		case w := <-res.Result:
			fmt.Fprintf(r.log, "--- %s exited with status %d\n", r.name, w.StatusCode)
		case err := <-res.Error:
			if ctx.Err() == nil {
				fmt.Fprintf(r.log, "--- %s: waiting for its container: %v\n", r.name, err)
			}
		}
		close(done)
	}()
	return done
}

func (r *ctrRunner) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c == nil {
		return
	}
	r.setPausedLocked(false) // a frozen container cannot act on SIGTERM
	ctx, cancel := context.WithTimeout(context.Background(), engineTimeout)
	defer cancel()
	grace := stopGrace
	if err := r.c.Stop(ctx, &grace); err != nil {
		fmt.Fprintf(r.log, "--- stop %s: %v\n", r.name, err)
	}
}

func (r *ctrRunner) pause() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.setPausedLocked(true)
}

func (r *ctrRunner) resume() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.setPausedLocked(false)
}

// setPausedLocked pauses or unpauses the container, if it runs and is not
// so already; r.mu is held.
func (r *ctrRunner) setPausedLocked(paused bool) {
	if r.c == nil || r.paused == paused {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), engineTimeout)
	defer cancel()
	op, id := "unpause", r.c.GetContainerID()
	var err error
	if paused {
		// Returns once the freezer reports every process frozen.
		op = "pause"
		_, err = dockerCli.ContainerPause(ctx, id, client.ContainerPauseOptions{})
	} else {
		_, err = dockerCli.ContainerUnpause(ctx, id, client.ContainerUnpauseOptions{})
	}
	if err != nil {
		fmt.Fprintf(r.log, "--- %s %s: %v\n", op, r.name, err)
		return
	}
	r.paused = paused
}

func (r *ctrRunner) pid() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c == nil {
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), engineTimeout)
	defer cancel()
	info, err := r.c.Inspect(ctx)
	if err != nil || info.State == nil {
		return 0
	}
	return info.State.Pid
}

// logs is the container's output, across restarts, as the engine keeps it.
func (r *ctrRunner) logs() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), engineTimeout)
	defer cancel()
	rc, err := r.c.Logs(ctx)
	if err != nil {
		return fmt.Sprintf("--- container output: %v\n", err)
	}
	defer rc.Close()
	var b logBuffer
	_, err = io.Copy(&b, rc)
	if err != nil {
		fmt.Fprintf(&b, "\n--- reading the container's output: %v\n", err)
	}
	return "--- container output:\n" + b.String()
}

// remove removes the container and its volumes.
func (r *ctrRunner) remove() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c == nil {
		return
	}
	r.setPausedLocked(false)
	ctx, cancel := context.WithTimeout(context.Background(), engineTimeout)
	defer cancel()
	if err := r.c.Terminate(ctx, testcontainers.StopTimeout(stopGrace)); err != nil {
		fmt.Fprintf(r.log, "--- remove %s: %v\n", r.name, err)
	}
	if r.cancelWait != nil {
		r.cancelWait()
		r.cancelWait = nil
	}
	r.c = nil
}

func (r *ctrRunner) containerID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c == nil {
		return ""
	}
	return r.c.GetContainerID()
}

func shortID(id string) string { return id[:min(12, len(id))] }

// logTo is testcontainers' logger writing into an emulator's log.
type logTo struct{ w io.Writer }

func (l logTo) Printf(format string, v ...any) {
	fmt.Fprintf(l.w, "--- testcontainers: "+strings.TrimSuffix(format, "\n")+"\n", v...)
}

// The reaper: see the comment at the top of this file.

// reaperEnv, set in a copy of the test binary, makes it the reaper of the
// session it names.
const reaperEnv = "OBJLEASE_EMULATOR_REAPER"

var (
	reaperPipe *os.File  // the test binary's end; closing it (or exiting) starts the reaping
	reaperCmd  *exec.Cmd // nil if no reaper runs
)

func init() {
	if s := os.Getenv(reaperEnv); s != "" {
		os.Exit(reap(s))
	}
}

func startReaper() error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), reaperEnv+"="+session)
	cmd.Stdin = r
	// Its output goes where the test binary's does: go test waits for it.
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	// Its own process group: a Ctrl-C meant for the tests must not stop
	// it before it has done its job. No Pdeathsig, for the same reason.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return err
	}
	reaperPipe, reaperCmd = w, cmd
	return nil
}

// reap waits until the test binary closes its end of stdin, by exiting or
// in StopAll, then removes every container of the session.
func reap(session string) int {
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP)
	_, _ = io.Copy(io.Discard, os.Stdin)
	tclog.SetDefault(logTo{io.Discard})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli, err := dialEngine()
	if err == nil {
		var n int
		n, err = removeSession(ctx, cli, session)
		if n > 0 {
			fmt.Fprintf(os.Stderr, "emulator reaper: removed %d container(s) the tests left behind\n", n)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "emulator reaper: %v\n", err)
		return 1
	}
	return 0
}

// removeSession removes the session's containers and their volumes and
// returns how many it found.
func removeSession(ctx context.Context, cli *testcontainers.DockerClient, session string) (int, error) {
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", sessionLabel+"="+session),
	})
	if err != nil {
		return 0, fmt.Errorf("list containers of session %s: %w", session, err)
	}
	var errs []error
	for _, c := range list.Items {
		if c.State == container.StatePaused {
			_, _ = cli.ContainerUnpause(ctx, c.ID, client.ContainerUnpauseOptions{})
		}
		if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
			errs = append(errs, fmt.Errorf("remove container %s (%s): %w", shortID(c.ID), c.Labels[emulatorLabel], err))
		}
	}
	return len(list.Items), errors.Join(errs...)
}

// stopDocker runs after every Process was stopped for good: it removes
// whatever container of the session is left (one whose start failed
// half-way) and lets the reaper go.
func stopDocker() {
	if dockerCli == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), engineTimeout)
	defer cancel()
	if n, err := removeSession(ctx, dockerCli, session); err != nil || n > 0 {
		fmt.Fprintf(os.Stderr, "emulator: removed %d container(s) left behind: %v\n", n, err)
	}
	if reaperCmd != nil {
		reaperPipe.Close()
		_ = reaperCmd.Wait()
		reaperCmd = nil
	}
}
