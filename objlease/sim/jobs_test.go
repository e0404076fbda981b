package sim

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/objlease/objlease/internal/entropy"
	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/fence"
	"github.com/objlease/objlease/objlease/job"
	"github.com/objlease/objlease/objlease/tick"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/faulty"
)

// The job simulation: commands run under a lease as the objlease command
// runs them (run --commit --once-per, or elect), through package job, the
// one that decides what a command's end means. Each runner process acquires
// the job's lease, starts a command under a supervisor and runs job.Run;
// the command writes its parts into a fenced batch and, if it is judged
// done, the runner commits the batch and marks the tick. The runner, the
// supervisor and the command are three processes that pause one at a time
// (SIGSTOP, a frozen runner, a stopped supervisor); the store fails and
// stalls; an operator breaks the lease. Commands exit 0 on SIGTERM, ignore
// it, or write once more after it.
//
// What the checks ask: was a batch committed (or a tick marked) for a
// command that was stopped or that had not finished its work, or whose
// exit came after another holder was granted the lease; was a stopped
// command judged anything but lost (an elector then exits instead of
// campaigning again); did two commands of the lease run at once for longer
// than the grace a stopped one has before SIGKILL; did a supervisor stop a
// command while its runner's lease was still valid.

// jobConfig is one job run's shape, drawn from its seed.
type jobConfig struct {
	seed     uint64
	model    string
	runners  int
	elect    bool // runners are electors: after a loss they campaign again
	ttl      time.Duration
	grace    time.Duration
	drift    float64
	faults   float64
	breaks   float64 // operator breaks a minute
	duration time.Duration
}

func (c jobConfig) String() string {
	return fmt.Sprintf("job seed %d: store %s, %d runners (elect %v), TTL %v, grace %v, drift ±%.0f%%, faults ×%.0f, breaks %.0f/min, %v",
		c.seed, c.model, c.runners, c.elect, c.ttl, c.grace, c.drift*100, c.faults, c.breaks, c.duration)
}

func jobConfigFor(seed uint64) jobConfig {
	r := rand.New(rand.NewPCG(seed, 0x70b5))
	c := jobConfig{
		seed:    seed,
		runners: 2 + r.IntN(3),
		elect:   r.IntN(2) == 0,
		ttl:     []time.Duration{100 * time.Millisecond, 300 * time.Millisecond, time.Second, 10 * time.Second}[r.IntN(4)],
		drift:   []float64{0.01, 0.05}[r.IntN(2)],
		faults:  []float64{0, 0, 1}[r.IntN(3)],
		breaks:  []float64{0, 0, 2}[r.IntN(3)],
	}
	c.grace = c.ttl * time.Duration(1+r.IntN(3)) / 2
	models := []string{"mem", "s3", "azure"}
	if c.ttl >= 3*time.Second {
		models = append(models, "gcs") // one write a second per object: RenewInterval at least 1 s
	}
	c.model = models[r.IntN(len(models))]
	c.duration = min(200*c.ttl, 2*time.Minute)
	return c
}

// Keys of the job.
const (
	jobKey    = "jobs/nightly"
	jobPrefix = "out/nightly/"
	jobParts  = 3
)

// Kinds of job violation.
const (
	vFinishedStopped = "work of a stopped or unfinished command committed"
	vFinishedLate    = "work committed for a command that exited after a newer grant"
	vStoppedNotLost  = "stopped command not judged lost"
	vCommandsOverlap = "two commands of one lease beyond the grace"
	vHealthyStopped  = "command stopped while its lease was valid"
)

// jobWorld is one job run.
type jobWorld struct {
	*world
	jcfg jobConfig

	mu       sync.Mutex
	grants   []jobEvent // tokens granted, in order
	breaks   []jobEvent
	commands []*simCommand
	vs       []violation
}

// jobEvent is a token granted or a break, and when.
type jobEvent struct {
	token uint64
	at    time.Duration
}

func (w *jobWorld) violate(kind, format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.vs = append(w.vs, violation{kind: kind, msg: fmt.Sprintf(format, args...), at: w.now()})
}

// simulateJobs runs one job seed in its own bubble.
func simulateJobs(t *testing.T, jc jobConfig) (vs []violation, trace []string, ops map[string]int64) {
	synctest.Test(t, func(t *testing.T) {
		salt := rand.New(rand.NewPCG(jc.seed, 0x5a17))
		defer entropy.Replace(func(b []byte) {
			for i := range b {
				b[i] = byte(salt.Uint32())
			}
		})()
		cfg := config{seed: jc.seed, ttl: jc.ttl, drift: jc.drift, duration: jc.duration, faults: jc.faults,
			lateWrites: 0.005 * jc.faults, model: jc.model, machines: plain, maxPause: 3 * jc.ttl}
		w := &jobWorld{world: &world{cfg: cfg, start: time.Now(), ops: map[string]int64{}, audit: &auditLog{}}, jcfg: jc}
		r := rand.New(rand.NewPCG(jc.seed, 0x5eed))
		root := newModel(jc.model, r.Uint64(), w.audit)
		w.store = providers.NewBucket(root)
		var wg sync.WaitGroup
		for i := range jc.runners {
			p := w.newProc(i, r)
			faults, err := newFaults(cfg, root, r)
			if err != nil {
				t.Fatal(err)
			}
			p.faults = faults
			p.store = &gateStore{Store: providers.NewBucket(faults[0]), raw: w.store, p: p, calm: &w.calm}
			c, err := newOn(p.store, jobKey, objlease.SessionOptions{Clock: p.clock.lib, Rand: rand.New(rand.NewPCG(r.Uint64(), r.Uint64())), Logger: slog.New(slog.DiscardHandler)}, objlease.Options{TTL: jc.ttl, DriftBound: jc.drift,
				Holder: fmt.Sprintf("r%d", i)})
			if err != nil {
				t.Fatal(err)
			}
			rn := &runner{w: w, p: p, c: c, sup: w.newProc(100+i, r), cmd: w.newProc(200+i, r),
				pauseRnd: rand.New(rand.NewPCG(r.Uint64(), r.Uint64()))}
			w.procs = append(w.procs, p)
			wg.Go(rn.run)
			wg.Go(rn.pauses)
		}
		if jc.breaks > 0 {
			wg.Go(func() { w.operate(rand.New(rand.NewPCG(jc.seed, 0x0fe7a))) })
		}
		time.Sleep(jc.duration)
		w.calm.Store(true)
		for _, f := range w.allFaults() {
			f.ReleaseStalls()
		}
		wg.Wait()
		w.late.Wait()
		w.checkFinal()
		vs, trace, ops = w.vs, w.trace, w.ops
	})
	return vs, trace, ops
}

// newProc is a process with a clock of its own (the runner's) or only a
// pause state (its supervisor's and command's, which read the runner's
// clock: one machine, one CLOCK_BOOTTIME).
func (w *jobWorld) newProc(id int, r *rand.Rand) *proc {
	return &proc{w: w.world, id: id,
		rnd:     rand.New(rand.NewPCG(r.Uint64(), r.Uint64())),
		gateRnd: rand.New(rand.NewPCG(r.Uint64(), r.Uint64())),
		clock:   newProcClock(r, w.cfg, w.start)}
}

func (w *jobWorld) allFaults() []*faulty.Driver {
	var fs []*faulty.Driver
	for _, p := range w.procs {
		fs = append(fs, p.faults...)
	}
	return fs
}

// operate breaks the lease now and then, as "objlease break" does.
func (w *jobWorld) operate(rnd *rand.Rand) {
	c, err := objlease.New(w.store, jobKey, objlease.Options{TTL: w.jcfg.ttl, Holder: "operator", Force: true})
	if err != nil {
		panic(err)
	}
	for {
		time.Sleep(time.Duration(rnd.ExpFloat64() * float64(time.Minute) / w.jcfg.breaks))
		if w.now() >= w.cfg.duration {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), w.jcfg.ttl)
		tok, err := c.Break(ctx)
		cancel()
		w.logf(nil, "break: token %d, %v", tok, err)
		w.count("break")
		w.mu.Lock()
		w.breaks = append(w.breaks, jobEvent{tok, w.now()})
		w.mu.Unlock()
	}
}

// runner is one process that runs the job: run --commit --once-per, or
// elect with a command.
type runner struct {
	w        *jobWorld
	p        *proc
	c        *objlease.Client
	sup      *proc // pause state of its supervisor
	cmd      *proc // and of its command
	pauseRnd *rand.Rand
}

func (r *runner) run() {
	w, p := r.w, r.p
	p.sleep(time.Duration(p.rnd.Int64N(int64(w.jcfg.ttl))))
	for w.now() < w.cfg.duration {
		ctx, cancel := context.WithTimeout(context.Background(), 3*w.jcfg.ttl)
		l, err := r.c.Acquire(ctx)
		cancel()
		if err != nil {
			p.sleep(time.Duration(p.rnd.Int64N(int64(w.jcfg.ttl))))
			continue
		}
		w.mu.Lock()
		w.grants = append(w.grants, jobEvent{l.Token(), w.now()})
		w.mu.Unlock()
		w.logf(p, "acquired token %d, valid for %v", l.Token(), l.ValidFor())
		res := r.runOne(l)
		w.logf(p, "token %d: %v (%s)", l.Token(), res.Outcome, res.Exit.How)
		w.count("job " + res.Outcome.String())
		switch {
		case w.jcfg.elect && res.Outcome == job.Lost:
			// Campaigns again at once, as elect does.
		default:
			// Run exits; the scheduler starts it again later.
			p.sleep(time.Duration(p.rnd.Int64N(int64(2 * w.jcfg.ttl))))
		}
	}
}

// runOne runs one command under l, as the objlease command does.
func (r *runner) runOne(l *objlease.Lease) job.Result {
	w, p := r.w, r.p
	token := l.Token()
	origin := p.clock.lib.Now()
	now := func() time.Duration { return p.clock.lib.Now().Sub(origin) }
	cmd := &simCommand{w: w, p: r.cmd, token: token, runner: p.id, behaviour: commandBehaviours[p.rnd.IntN(len(commandBehaviours))],
		steps: make([]time.Duration, jobParts+1), termc: make(chan struct{}), killc: make(chan struct{}), exited: make(chan struct{})}
	for i := range cmd.steps {
		cmd.steps[i] = time.Duration(float64(w.jcfg.ttl) * (0.05 + p.rnd.Float64()))
	}
	sup := &simSupervisor{w: w, p: r.sup, runnerLease: l, now: now, clock: p.clock, cmd: cmd, grace: w.jcfg.grace,
		deadlines: make(chan time.Duration, 1024), orders: make(chan string, 16), killed: make(chan struct{}), reported: make(chan struct{})}
	first := now() + l.ValidFor() // told before the supervisor starts
	go sup.run(first, r.w.store)
	go job.Deadlines(l, now, first, func(end time.Duration) bool {
		_ = p.awaitRunning(context.Background()) // run's own goroutine
		sup.deadlines <- end
		return true
	}, sup.reported)
	task := &simTask{sup: sup, cmd: cmd, done: seenBy(p, sup.reported)}
	j := &job.Job{Lease: &seenLease{Lease: l, done: seenBy(p, l.Done())}, Task: task, Grace: w.jcfg.grace,
		Logger: slog.New(slog.DiscardHandler),
		Finish: func() error {
			cmd.mu.Lock()
			stopped, written, exitAt := cmd.signalled, cmd.written, cmd.end
			cmd.mu.Unlock()
			if stopped || written < jobParts {
				w.violate(vFinishedStopped, "p%d token %d: committing the work of a command that was stopped (%v) or wrote %d of %d parts", p.id, token, stopped, written, jobParts)
			}
			w.mu.Lock()
			for _, g := range w.grants {
				// A broken holder may believe until its next renewal
				// fails; the store's fence still orders the commits.
				broken := slices.ContainsFunc(w.breaks, func(b jobEvent) bool { return b.token > token && b.token <= g.token })
				if g.token > token && g.at < exitAt && !broken {
					w.vs = append(w.vs, violation{kind: vFinishedLate, at: w.now(),
						msg: fmt.Sprintf("p%d token %d: committing the work of a command that exited at %v, after token %d was granted at %v", p.id, token, exitAt, g.token, g.at)})
				}
			}
			w.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), 2*w.jcfg.ttl)
			defer cancel()
			if _, err := fence.CommitWritten(ctx, p.store, jobPrefix, token, false); err != nil {
				return err
			}
			return tick.Done(ctx, p.store, l, fmt.Sprintf("run-%d", token))
		},
		Release: func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*w.jcfg.ttl)
			defer cancel()
			return l.Release(ctx)
		}}
	res := j.Run()
	cmd.mu.Lock()
	if cmd.signalled && res.Outcome != job.Lost && res.Outcome != job.NotStarted {
		kind := "run exited as if it ended by itself"
		if w.jcfg.elect {
			kind = "the elector stopped campaigning"
		}
		cmd.mu.Unlock()
		w.violate(vStoppedNotLost, "p%d token %d: its command was stopped, but judged %v: %s", p.id, token, res.Outcome, kind)
		return res
	}
	cmd.mu.Unlock()
	return res
}

// pauses pauses, one at a time, the runner, its supervisor or its
// command. Never two at once: a stopped runner and a stopped supervisor
// leave no one to stop the command (docs/cli.md), and that is what
// fencing is for.
func (r *runner) pauses() {
	w, rnd := r.w, r.pauseRnd
	for {
		time.Sleep(time.Duration(float64(w.jcfg.ttl) * (1 + 5*rnd.Float64())))
		if w.now() >= w.cfg.duration {
			return
		}
		d := time.Duration(float64(w.jcfg.ttl) * 3 * rnd.Float64())
		i := rnd.IntN(3)
		w.count([]string{"pause of a runner", "pause of a supervisor", "pause of a command"}[i])
		[]*proc{r.p, r.sup, r.cmd}[i].pause(d)
		time.Sleep(d)
	}
}

// seenBy is ch as the paused-or-running process p sees it: closed once
// ch is and p is running.
func seenBy(p *proc, ch <-chan struct{}) <-chan struct{} {
	seen := make(chan struct{})
	go func() {
		<-ch
		_ = p.awaitRunning(context.Background())
		close(seen)
	}()
	return seen
}

// seenLease is the runner's lease, whose end the runner sees only when it
// runs.
type seenLease struct {
	*objlease.Lease
	done <-chan struct{}
}

func (l *seenLease) Done() <-chan struct{} { return l.done }

// commandBehaviours: what a command does on SIGTERM.
var commandBehaviours = []string{"exits 0", "ignores it", "writes once more, then exits 0"}

// simCommand is a command: it writes jobParts parts into its token's batch,
// a step apart, and exits 0; SIGTERM reaches it only while it runs, SIGKILL
// at once.
type simCommand struct {
	w         *jobWorld
	p         *proc
	token     uint64
	runner    int
	behaviour string
	steps     []time.Duration
	termc     chan struct{}
	killc     chan struct{}
	termOnce  sync.Once
	killOnce  sync.Once
	exited    chan struct{}

	mu         sync.Mutex
	signalled  bool
	written    int
	status     int
	how        string
	start, end time.Duration
}

func (c *simCommand) term() {
	c.mu.Lock()
	c.signalled = true
	c.mu.Unlock()
	c.termOnce.Do(func() { close(c.termc) })
}

func (c *simCommand) kill() {
	c.mu.Lock()
	c.signalled = true
	c.mu.Unlock()
	c.killOnce.Do(func() { close(c.killc) })
}

func (c *simCommand) run(store providers.Store, prefix string) {
	w := c.w
	c.mu.Lock()
	c.start = w.now()
	c.mu.Unlock()
	w.mu.Lock()
	w.commands = append(w.commands, c)
	w.mu.Unlock()
	w.count("command started")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-c.killc:
			cancel()
		case <-ctx.Done():
		}
	}()
	status, how := c.work(ctx, fence.NewBatch(store, prefix, c.token))
	c.mu.Lock()
	c.status, c.how, c.end = status, how, w.now()
	c.mu.Unlock()
	w.logf(c.p, "command of token %d: %s", c.token, how)
	close(c.exited)
}

// work is the command's body; it returns its status once it exits.
func (c *simCommand) work(ctx context.Context, b *fence.Batch) (int, string) {
	termc := c.termc
	last := false
	for i := 0; ; i++ {
		t := time.NewTimer(c.steps[i%len(c.steps)])
		select {
		case <-ctx.Done():
			t.Stop()
			return 137, "signal: killed"
		case <-termc:
			t.Stop()
			termc = nil
			if c.p.awaitRunning(ctx) != nil { // a stopped process acts on SIGTERM once continued
				return 137, "signal: killed"
			}
			switch c.behaviour {
			case "exits 0":
				return 0, "exit status 0 (on SIGTERM)"
			case "writes once more, then exits 0":
				last = true
			}
			continue
		case <-t.C:
		}
		if c.p.awaitRunning(ctx) != nil {
			return 137, "signal: killed"
		}
		if err := b.Put(ctx, fmt.Sprintf("part%d", i), fmt.Appendf(nil, "token %d part %d", c.token, i)); err != nil {
			if ctx.Err() != nil {
				return 137, "signal: killed"
			}
			return 1, "exit status 1 (a write failed)"
		}
		c.mu.Lock()
		c.written++
		done := c.written >= jobParts
		c.mu.Unlock()
		if done {
			return 0, "exit status 0"
		}
		if last {
			return 0, "exit status 0 (after SIGTERM)"
		}
	}
}

// simSupervisor is the command's supervisor: it stops the command when
// the last deadline it was told passes, and reports its end; while it is
// paused it does neither (it cannot reap a stopped process's child).
type simSupervisor struct {
	w           *jobWorld
	p           *proc
	runnerLease *objlease.Lease
	now         func() time.Duration
	clock       *driftClock
	cmd         *simCommand
	grace       time.Duration
	deadlines   chan time.Duration
	orders      chan string // from the runner: "TERM", "KILL"
	killed      chan struct{}
	killOnce    sync.Once
	reported    chan struct{}
	exit        job.Exit
}

func (s *simSupervisor) run(end time.Duration, store providers.Store) {
	// SIGKILL reaches a stopped supervisor too.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.killed:
			cancel()
		case <-ctx.Done():
		}
	}()
	defer close(s.reported)
	if end <= s.now() {
		s.exit = job.Exit{Err: fmt.Errorf("%w: the lease's validity ended before the command could start", objlease.ErrLeaseLost)}
		return
	}
	go s.cmd.run(store, jobPrefix)
	alarm := s.clock.NewTimer(end - s.now())
	defer func() { alarm.Stop() }()
	stopping := false
	var graceOver <-chan time.Time
	for {
		select {
		case e := <-s.deadlines:
			if e > end {
				end = e
			}
		case <-alarm.C():
		case <-graceOver:
			graceOver = nil
			if s.p.awaitRunning(ctx) == nil {
				s.cmd.kill()
			}
		case o := <-s.orders:
			if s.p.awaitRunning(ctx) != nil {
				break
			}
			if o == "KILL" {
				stopping = true
				s.cmd.kill()
			} else if !stopping {
				s.cmd.term()
			}
		case <-ctx.Done():
		case <-s.cmd.exited:
		}
		if s.p.awaitRunning(ctx) != nil {
			s.exit = job.Exit{Status: 137, How: "supervisor killed", Stopped: true}
			return
		}
		if isClosed(s.cmd.exited) {
			s.cmd.mu.Lock()
			s.exit = job.Exit{Status: s.cmd.status, How: s.cmd.how, Stopped: stopping}
			s.cmd.mu.Unlock()
			return
		}
		for len(s.deadlines) > 0 { // what run wrote while this one was stopped
			end = max(end, <-s.deadlines)
		}
		if stopping {
			continue
		}
		left := end - s.now()
		if left > 0 {
			alarm.Stop()
			alarm = s.clock.NewTimer(left)
			continue
		}
		stopping = true
		if v := s.runnerLease.ValidFor(); v > time.Millisecond {
			s.w.violate(vHealthyStopped, "p%d token %d: the supervisor stopped the command at its deadline while the lease was valid for %v more", s.p.id-100, s.cmd.token, v)
		}
		s.w.logf(s.p, "supervisor: token %d's validity ended; SIGTERM", s.cmd.token)
		s.w.count("supervisor stopped a command")
		s.cmd.term()
		graceOver = time.After(s.grace)
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// simTask is the runner's handle on the command under its supervisor.
type simTask struct {
	sup  *simSupervisor
	cmd  *simCommand
	done <-chan struct{}
}

func (t *simTask) Done() <-chan struct{}      { return t.done }
func (t *simTask) Ended() job.Exit            { return t.sup.exit }
func (t *simTask) Signal(sig os.Signal) error { return nil }

// Terminate signals the command itself, as the supervisor may be stopped.
func (t *simTask) Terminate() error {
	if stopTaskDirectly() {
		t.cmd.term()
	} else {
		t.sup.orders <- "TERM"
	}
	return nil
}

// Kill kills the command itself, and kills its supervisor a second later
// if it has not reported by then.
func (t *simTask) Kill() error {
	if !stopTaskDirectly() {
		t.sup.orders <- "KILL"
		return nil
	}
	t.cmd.kill()
	go func() {
		timer := time.NewTimer(time.Second)
		defer timer.Stop()
		select {
		case <-t.sup.reported:
		case <-timer.C:
			t.sup.killOnce.Do(func() { close(t.sup.killed) })
		}
	}()
	return nil
}

// checkFinal checks what needs the whole run: commands that overlapped,
// and the committed batch and tick mark.
func (w *jobWorld) checkFinal() {
	w.mu.Lock()
	cmds := append([]*simCommand(nil), w.commands...)
	breaks := w.breaks
	w.mu.Unlock()
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].token < cmds[j].token })
	byToken := map[uint64]*simCommand{}
	for i, a := range cmds {
		byToken[a.token] = a
		for _, b := range cmds[i+1:] {
			if b.token == a.token || b.start >= a.end {
				continue
			}
			// A broken holder may believe until its next renewal.
			broken := slices.ContainsFunc(breaks, func(br jobEvent) bool { return br.token > a.token && br.token <= b.token })
			if over := a.end - b.start; !broken && over > w.jcfg.grace+time.Millisecond {
				w.vs = append(w.vs, violation{kind: vCommandsOverlap, at: b.start,
					msg: fmt.Sprintf("the command of token %d (%s) ran %v beside token %d's, longer than the grace %v", a.token, a.behaviour, over, b.token, w.jcfg.grace)})
			}
		}
	}
	ctx := context.Background()
	if m, err := fence.ReadCommitted(ctx, w.store, jobPrefix); err == nil && m != nil {
		if c := byToken[m.Token]; c == nil || len(m.Objects) != jobParts || c.signalled {
			w.vs = append(w.vs, violation{kind: vFinishedStopped, msg: fmt.Sprintf("the committed batch is token %d's, with %d of %d parts", m.Token, len(m.Objects), jobParts)})
		}
	}
	if marks, err := tick.Read(ctx, w.store, jobKey); err == nil && marks.Last() != nil {
		mk := marks.Last()
		if c := byToken[mk.Token]; c == nil || c.signalled {
			w.vs = append(w.vs, violation{kind: vFinishedStopped, msg: fmt.Sprintf("the tick was marked by token %d, whose command was stopped", mk.Token)})
		}
	}
}

// TestJobSimulation runs commands under leases through package job, with
// pauses of each process, store faults and breaks, and finds nothing.
func TestJobSimulation(t *testing.T) {
	seeds := *flagSeeds
	if seeds == 0 {
		seeds = 40
		if *flagLong {
			seeds = 5000
		}
	}
	off := *flagOff
	if off != "" {
		// Counts what a safeguard prevents, over the job mix.
		sw := safeguardSwitch(off)
		if sw == nil {
			t.Fatalf("-sim.off=%s: no such switch of the job layer%s", off, switchesHint)
		}
		sw.Store(false)
		defer sw.Store(true)
	}
	counts := map[string]int{}
	seedsWith := map[string]int{}
	total := map[string]int64{}
	for seed := *flagFrom; seed < *flagFrom+uint64(seeds); seed++ {
		jc := jobConfigFor(seed)
		vs, trace, ops := simulateJobs(t, jc)
		for k, n := range ops {
			total[k] += n
		}
		kinds := map[string]bool{}
		for _, v := range vs {
			counts[v.kind]++
			kinds[v.kind] = true
		}
		for k := range kinds {
			seedsWith[k]++
		}
		if off != "" {
			continue
		}
		if len(vs) > 0 || *flagV {
			for _, line := range trace {
				t.Log(line)
			}
		}
		for _, v := range vs {
			t.Errorf("%v: %s at %v: %s", jc, v.kind, v.at, v.msg)
		}
	}
	t.Logf("%d job seeds: %v; violations by kind: %v; seeds with each kind: %v", seeds, total, counts, seedsWith)
}
