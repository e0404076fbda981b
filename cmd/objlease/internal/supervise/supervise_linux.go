package supervise

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/job"
)

// Supported reports whether this platform has the supervisor: on Linux,
// run does not start COMMAND itself but a supervisor: this
// binary again, as the hidden command _supervise, which starts COMMAND in
// a process group of its own and stays its parent until every process
// COMMAND started has exited. The supervisor
//
//   - is started with PR_SET_PDEATHSIG set to SIGUSR1, a signal it catches:
//     if run dies without a chance to act (SIGKILL, a crash), the kernel
//     tells the supervisor, which kills COMMAND's whole process tree;
//   - is a child subreaper (PR_SET_CHILD_SUBREAPER): a process COMMAND
//     started becomes the supervisor's child, not init's, when its parent
//     exits, so that nothing it started escapes, even into a session or
//     process group of its own;
//   - passes on to COMMAND's process group the SIGINT, SIGTERM and SIGHUP
//     that run sends it, and on SIGUSR1 kills the whole tree at once with
//     SIGKILL (run sends it once --grace has passed after losing the lease);
//   - once COMMAND has exited, sends SIGTERM to whatever it left running and
//     SIGKILL after --grace, and exits once the last of them has; run keeps
//     the lease until then;
//   - reports how COMMAND ended on a pipe (its file descriptor 3), since
//     its own exit status cannot say "killed by signal N";
//   - reads, on a second pipe (its file descriptor 4), the end of the
//     lease's validity each time a renewal moves it, as a CLOCK_BOOTTIME
//     reading, and when that moment passes without a newer one it stops
//     the tree as run would have (SIGTERM, SIGKILL after --grace) on its
//     own, whatever state run is in: stopped (SIGSTOP, a debugger, a
//     freezer aimed at run), starved or hung. CLOCK_BOOTTIME counts
//     suspend and is one clock for both processes, so no two clocks need
//     agree. A validity already over when the supervisor starts means
//     COMMAND is not started at all.
//
// The supervisor is in a process group of its own, apart from run's and
// COMMAND's: a signal sent to run's group (a Ctrl-C when run does not hold
// the terminal) reaches COMMAND once, passed on by run, not a second time
// through the supervisor.
const Supported = true

// startDrain is how long the supervisor, starting, takes in all to read
// the newer ends of the validity queued behind the first one.
const startDrain = 10 * time.Millisecond

// killTreeSignal is the supervisor's order to kill the whole tree at once:
// its parent-death signal, and what run sends after --grace.
const killTreeSignal = syscall.SIGUSR1

// supervised is COMMAND as run started it: the supervisor that runs it.
type supervised struct {
	sup    *exec.Cmd
	exited <-chan struct{}
	// pgid is COMMAND's process group (its pid), once the supervisor has
	// reported it: run signals it directly, since the supervisor may be
	// stopped when the lease is lost.
	pgid atomic.Int64
	// last is the supervisor's last report line, once reported is closed.
	last     string
	reported chan struct{}
	killOnce sync.Once
}

// start starts cmd under a supervisor, which stops it once o.Lease's
// validity ends unless renewals move that end; with o.TTY false the
// command is never given the terminal (group join runs several at once,
// none in the foreground).
func start(cmd *exec.Cmd, o Options) (Task, error) {
	if cmd.Err != nil {
		return nil, cmd.Err // not found on $PATH
	}
	dr, dw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer dr.Close()
	// The first deadline is in the pipe before the supervisor starts.
	told := tellDeadline(dw, o.Lease, 0)
	args := []string{os.Args[0], Command, "--grace", o.Grace.String(), "--parent", strconv.Itoa(os.Getpid())}
	args = append(args, o.Args...)
	if fg, err := unix.IoctlGetInt(0, unix.TIOCGPGRP); o.TTY && err == nil && fg == syscall.Getpgrp() {
		args = append(args, "--tty", strconv.Itoa(fg))
	}
	r, w, err := os.Pipe()
	if err != nil {
		dw.Close()
		return nil, err
	}
	// /proc/self/exe is this binary even if the file has been replaced
	// since it started. os.Args[0] is kept for programs that dispatch on
	// their name.
	sup := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       append(append(args, "--", cmd.Path), cmd.Args...),
		Env:        cmd.Env,
		Stdin:      cmd.Stdin,
		Stdout:     cmd.Stdout,
		Stderr:     cmd.Stderr,
		ExtraFiles: []*os.File{w, dr},
		SysProcAttr: &syscall.SysProcAttr{
			Setpgid:   true,
			Pdeathsig: killTreeSignal,
		},
	}
	exited, err := spawn(sup)
	w.Close()
	if err != nil {
		r.Close()
		dw.Close()
		return nil, err
	}
	s := &supervised{sup: sup, exited: exited, reported: make(chan struct{})}
	go s.readReport(r)
	go func() {
		defer dw.Close()
		job.Deadlines(o.Lease, bootNow, told, func(end time.Duration) bool {
			_, err := fmt.Fprintf(dw, "%d\n", end)
			return err == nil
		}, exited)
	}()
	return s, nil
}

// readReport reads the supervisor's report: COMMAND's pid as soon as it
// has started, then how it ended.
func (s *supervised) readReport(r *os.File) {
	defer close(s.reported)
	defer r.Close()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if pid, ok := strings.CutPrefix(sc.Text(), "pid "); ok {
			if n, err := strconv.Atoi(pid); err == nil && n > 0 {
				s.pgid.Store(int64(n))
			}
			continue
		}
		s.last = sc.Text()
	}
}

// tellDeadline writes l's validity end to w if it is later than told (a
// CLOCK_BOOTTIME reading, read before ValidFor, so that the end told is
// never later than the true one), and returns the end told.
func tellDeadline(w *os.File, l job.Lease, told time.Duration) time.Duration {
	now := bootNow()
	end := now + max(l.ValidFor(), 0)
	if end > told {
		if _, err := fmt.Fprintf(w, "%d\n", end); err != nil {
			return told
		}
		told = end
	}
	return told
}

// bootNow reads CLOCK_BOOTTIME.
func bootNow() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		panic("CLOCK_BOOTTIME: " + err.Error()) // Linux has had it since 2.6.39
	}
	return time.Duration(ts.Nano())
}

func (s *supervised) Pid() int                   { return s.sup.Process.Pid }
func (s *supervised) Done() <-chan struct{}      { return s.exited }
func (s *supervised) Signal(sig os.Signal) error { return s.sup.Process.Signal(sig) }

// Terminate sends SIGTERM to COMMAND's process group itself, so that it
// arrives even if the supervisor is stopped; before the supervisor has
// reported the group, through the supervisor.
func (s *supervised) Terminate() error {
	if pgid := s.pgid.Load(); pgid > 0 && stopTaskDirectly() {
		return groupErr(syscall.Kill(-int(pgid), syscall.SIGTERM))
	}
	return s.sup.Process.Signal(syscall.SIGTERM)
}

// supervisorKillWait is how long a supervisor told to kill its tree has to
// exit before run kills it too: one that does not is stopped or hung.
const supervisorKillWait = time.Second

// Kill sends SIGKILL to COMMAND's process group and to everything below
// the supervisor itself, and tells the supervisor to do the same; a
// supervisor that has not exited a second later is killed (a stopped one
// would keep run waiting for as long as it stays stopped).
func (s *supervised) Kill() error {
	if !stopTaskDirectly() {
		return s.sup.Process.Signal(killTreeSignal)
	}
	if pgid := s.pgid.Load(); pgid > 0 {
		_ = syscall.Kill(-int(pgid), syscall.SIGKILL)
	}
	for _, pid := range descendants(s.Pid()) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	err := s.sup.Process.Signal(killTreeSignal)
	s.killOnce.Do(func() {
		go func() {
			t := time.NewTimer(supervisorKillWait)
			defer t.Stop()
			select {
			case <-s.exited:
			case <-t.C:
				_ = s.sup.Process.Kill()
			}
		}()
	})
	return err
}

// groupErr is a process group's signal error, os.ErrProcessDone if the
// group is gone.
func groupErr(err error) error {
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

// Ended reads the supervisor's report once it has exited.
func (s *supervised) Ended() job.Exit {
	<-s.reported
	word, rest, _ := strings.Cut(s.last, " ")
	switch word {
	case "status":
		rest, stopped := strings.CutSuffix(rest, " stopped")
		if n, err := strconv.ParseUint(rest, 10, 32); err == nil {
			ws := syscall.WaitStatus(n)
			return job.Exit{Status: waitStatusCode(ws), How: describeWait(ws), Stopped: stopped}
		}
	case "notfound":
		return job.Exit{Err: fmt.Errorf("%w (%s)", ErrNotFound, rest)}
	case "cannotstart":
		return job.Exit{Err: fmt.Errorf("%w (%s)", ErrCannotStart, rest)}
	case "expired":
		return job.Exit{Err: fmt.Errorf("%w: %s", objlease.ErrLeaseLost, rest)}
	}
	// The supervisor died before it could report (it was killed).
	ps := s.sup.ProcessState
	return job.Exit{Status: exitStatus(ps), How: "supervisor " + ps.String(), Stopped: true}
}

// waitStatusCode is the shell's view of a wait status.
func waitStatusCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// describeWait says how a process ended, as os.ProcessState.String does.
func describeWait(ws syscall.WaitStatus) string {
	if ws.Signaled() {
		s := "signal: " + ws.Signal().String()
		if ws.CoreDump() {
			s += " (core dumped)"
		}
		return s
	}
	return "exit status " + strconv.Itoa(ws.ExitStatus())
}

// Serve is the supervisor, the hidden command [Command]: it runs path with
// argv as described at [Supported], reports on report (its file descriptor
// 3) and reads deadlines on deadlines (4), passes on the signals from
// signals, and returns its exit code. parent is the pid of the process
// that started it; tty, if not 0, the process group to give the terminal
// back to.
func Serve(log *slog.Logger, signals <-chan os.Signal, report, deadlines *os.File, grace time.Duration, parent, tty int, path string, argv []string) int {
	// The command's parent-death signal fires when this thread exits.
	runtime.LockOSThread()
	killNow := make(chan os.Signal, 1)
	signal.Notify(killNow, killTreeSignal)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		log.Warn("cannot become a child subreaper: processes the command starts may outlive it", "err", err)
	}
	if os.Getppid() != parent {
		return 1 // run died before this supervisor could start the command
	}
	ends := readDeadlines(deadlines)
	end, ok := <-ends
	// A supervisor slow to start (a loaded machine) finds renewals that
	// landed meanwhile queued behind the first end: the newest counts.
	// The drain is bounded as a whole: renewals that keep coming, as they
	// do at the shortest TTLs, must not keep the command from starting.
	drained := time.After(startDrain)
	for more := ok; more; {
		select {
		case e, open := <-ends:
			end, more = max(end, e), open
		case <-drained:
			more = false
		}
	}
	if !ok || bootNow() >= end {
		fmt.Fprintf(report, "expired the lease's validity ended before the command could start\n")
		return 1
	}
	alarm, err := newBootAlarm()
	if err != nil {
		log.Warn("no CLOCK_BOOTTIME timer: the validity end is checked every second", "err", err)
	}
	alarm.set(end)
	defer alarm.close()
	cmd := &exec.Cmd{Path: path, Args: argv, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	giveBack := func() {}
	if tty != 0 {
		attr.Foreground, attr.Ctty = true, 0
		giveBack = func() {
			signal.Ignore(syscall.SIGTTOU)
			_ = unix.IoctlSetPointerInt(0, unix.TIOCSPGRP, tty)
		}
	}
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		giveBack()
		word := "cannotstart"
		if errors.Is(err, fs.ErrNotExist) {
			word = "notfound"
		}
		fmt.Fprintf(report, "%s %s\n", word, strings.ReplaceAll(err.Error(), "\n", " "))
		return 1
	}
	pgid := cmd.Process.Pid
	fmt.Fprintf(report, "pid %d\n", pgid)

	type reaped struct {
		pid int
		ws  syscall.WaitStatus
	}
	reapc := make(chan reaped)
	go func() {
		// Reaps the command and every orphan handed to this subreaper;
		// cmd.Wait is never called.
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, 0, nil)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil { // ECHILD: no child left
				close(reapc)
				return
			}
			reapc <- reaped{pid, ws}
		}
	}()

	var level syscall.Signal // what the tree gets: 0 while the command runs
	var graceOver <-chan time.Time
	for {
		select {
		case s := <-signals:
			// Once the tree is being stopped, run's own SIGTERM for the
			// same lost lease is not passed on a second time.
			if sig, ok := s.(syscall.Signal); ok && (level == 0 || sig != syscall.SIGTERM) {
				_ = syscall.Kill(-pgid, sig)
			}
		case e, ok := <-ends:
			if !ok {
				ends = nil // run closed it: the last end told stands
				continue
			}
			if e > end {
				end = e
				alarm.set(end)
			}
		case <-alarm.c:
			if level != 0 {
				continue
			}
			if bootNow() < end {
				alarm.set(end) // a timer without CLOCK_BOOTTIME, or moved
				continue
			}
			// The lease's validity is over and run said nothing newer.
			level = syscall.SIGTERM
			killTree(pgid, level)
			graceOver = time.After(grace)
		case <-killNow:
			level = syscall.SIGKILL
			killTree(pgid, level)
		case <-graceOver:
			level = syscall.SIGKILL
			killTree(pgid, level)
		case r, ok := <-reapc:
			if !ok {
				return 0
			}
			if r.pid == pgid {
				giveBack()
				// Stopped: this supervisor had begun to stop the tree, at
				// the validity's end or on run's order to kill it.
				stopped := ""
				if level != 0 {
					stopped = " stopped"
				}
				fmt.Fprintf(report, "status %d%s\n", uint32(r.ws), stopped)
				report.Close()
				if level == 0 {
					level = syscall.SIGTERM
					graceOver = time.After(grace)
				}
			}
			if level != 0 {
				// Also the orphans just handed over by the one reaped.
				killTree(pgid, level)
			}
		}
	}
}

// killTree sends sig to the process group pgid and to every descendant of
// this process, wherever its group or session.
func killTree(pgid int, sig syscall.Signal) {
	_ = syscall.Kill(-pgid, sig)
	for _, pid := range descendants(os.Getpid()) {
		_ = syscall.Kill(pid, sig)
	}
}

// descendants lists the processes below pid, from /proc. A process forked
// meanwhile is missed, and found when its parent is reaped.
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			continue
		}
		if pp, err := strconv.Atoi(f[1]); err == nil {
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	for queue := children[pid]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, children[queue[0]]...)
	}
	return out
}
