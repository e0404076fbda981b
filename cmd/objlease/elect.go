package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/election"
	"github.com/objlease/objlease/objlease/job"
)

const electDetail = `Campaigns for leadership through the lease at URL, like "etcdctl elect".
The leader is whoever holds the lease; its record carries the leader's
--value (for example its address), which followers read with
"objlease elect --listen URL" or "objlease inspect URL".

With a COMMAND: while this process leads, it runs COMMAND, as run does:
COMMAND gets OBJLEASE_TOKEN (the fencing token), OBJLEASE_HOLDER,
OBJLEASE_URL and OBJLEASE_LEADER_VALUE (--value) in its environment, runs
in a process group of its own (on Linux under a supervisor that stays its
parent), and gets SIGINT, SIGTERM and SIGHUP sent to elect. Nothing of
elect's own goes to stdout.

  - Leadership lost (a renewal was refused because the record changed,
    "objlease break" for instance, or no renewal succeeded in time):
    COMMAND gets SIGTERM, SIGKILL after --grace; once it has exited, elect
    campaigns again, and starts COMMAND again, with the new token, when it
    is re-elected.
  - COMMAND exits by itself: elect releases the lease (keeping its token)
    and exits with COMMAND's status (128+N if it died of signal N); 76 if
    the lease was lost before COMMAND exited.
  - A signal while campaigning ends elect: exit 128+N. A signal while
    leading goes to COMMAND, and elect exits once COMMAND has, as above.
  - COMMAND cannot be started: the lease is released; exit 126 (127: not
    found).

Without a COMMAND: elect prints a line when elected ("elected  token=N
holder=H value=V"; with -o json one object {"event","key","url","token",
"holder","value","ttl_ms","acquired_at"}) and holds the leadership,
renewing it, until it is sent SIGINT, SIGTERM or SIGHUP: then it resigns
(releases the lease, keeping its token) and exits 0. If leadership is lost
it prints a "lost" line (or object) and campaigns again. A signal while
campaigning exits 128+N.

--listen does not campaign: it prints the current leader at once, or "no
leader", then one line per change of leader, until signalled (exit 0):

  TIME  leader     holder=H  token=N  value=V  since=ACQUIRED
  TIME  no leader  state=released  token=N

TIME is when this observer saw the change (its clock, UTC); since is when
the leader took the lease (the leader's clock). A held record that this
observer has seen unchanged for TTL × (1 + drift) (its holder stopped
renewing) is "no leader  state=expired". With -o json each line is one
object with the fields time, event ("leader" or "no-leader"), key, state,
token and, where known, holder, value and since. It reads on the leader's
renewal phase, as a waiting candidate does (--poll D: every D; default 1s).

Candidates wait as run does: a leader that died is taken over once this
process has seen its record unchanged for TTL × (1 + drift), or at once
with --store-clock where the store's clock says so. Errors that waiting
cannot cure (a missing bucket, refused credentials, an object at the key
that is not a lease record) end elect at once, with their exit codes.`

// electEvent is what elect prints without a command: one when elected,
// one when leadership is lost.
type electEvent struct {
	Event      string    `json:"event"`
	Key        string    `json:"key"`
	URL        string    `json:"url"`
	Token      uint64    `json:"token"`
	Holder     string    `json:"holder"`
	Value      string    `json:"value"`
	TTLMillis  int64     `json:"ttl_ms"`
	AcquiredAt time.Time `json:"acquired_at"`
}

// leaderEvent is one line of elect --listen.
type leaderEvent struct {
	Time   time.Time `json:"time"`
	Event  string    `json:"event"` // leader or no-leader
	Key    string    `json:"key"`
	State  string    `json:"state"` // held, released, expired or absent
	Holder string    `json:"holder,omitempty"`
	Token  uint64    `json:"token,omitempty"`
	Value  string    `json:"value,omitempty"`
	Since  time.Time `json:"since,omitzero"`
}

// listenPoll is how often elect --listen reads by default, where the
// leader's renewal phase does not time its reads.
const listenPoll = time.Second

func (c *cli) electCmd(fs *flagSet) action {
	var lf leaseFlags
	lf.addTTL(fs)
	lf.addHolder(fs)
	lf.addExpiry(fs)
	lf.addPoll(fs, 0, "read the record every `duration` while another process leads, at most TTL: fewer reads, a later takeover (default: on the leader's renewal phase, once per renewal interval TTL/3, just after each renewal lands; with --listen, every 1s)")
	grace := addGrace(fs)
	value := fs.String("value", "", "the leader's `value` (for example its address), kept in the lease record while this process leads; followers read it with --listen or inspect")
	listen := fs.Bool("listen", false, "do not campaign: print the leader now, then a line per change of leader, until signalled")
	asJSON := addOutput(fs)
	httpAddr := addHTTP(fs)
	fs.checks = append(fs.checks, func() error {
		valueSet := fs.isSet("value")
		switch {
		case *listen && valueSet:
			return errors.New("--value with --listen: a listener does not campaign, so it has no value to publish")
		case len(*value) > objlease.MaxDataSize:
			return fmt.Errorf("--value is %d bytes, more than the %d a lease record carries", len(*value), objlease.MaxDataSize)
		}
		return nil
	})
	return func(ctx context.Context, pos []string) error {
		if len(pos) == 0 {
			return usagef("elect needs a URL: objlease elect [flags] URL [-- COMMAND [ARGS...]]")
		}
		url := pos[0]
		var argv []string
		if len(pos) > 1 {
			if argv = pos[2:]; len(argv) == 0 {
				return usagef("elect needs a command after --: objlease elect [flags] URL -- COMMAND [ARGS...]")
			}
			if *listen {
				return usagef("elect: --listen takes no command: a listener does not campaign")
			}
		}
		if *listen && lf.poll == 0 {
			lf.poll = listenPoll
		}
		stop, err := c.serveHTTP(*httpAddr, "elect", url)
		if err != nil {
			return err
		}
		defer stop()
		if *listen {
			c.probe.set(func(p *probe) {
				p.ready = func(p *probe) (bool, string) { return p.holder != "", "no leader" }
			})
		}
		if *listen {
			cl, err := c.clientWith(ctx, &lf, url, c.log, func(opts *objlease.Options) {
				if opts.Holder == "" {
					opts.Holder = "objlease-listen" // never written
				}
			})
			if err != nil {
				return opErr("elect", url, err)
			}
			defer cl.Store().Close()
			return opErr("elect", url, c.listenLeader(ctx, cl, *asJSON))
		}
		store, key, err := c.open(ctx, url, true)
		if err != nil {
			return opErr("elect", url, err)
		}
		defer store.Close()
		sess, opts, err := c.session(store, &lf)
		if err != nil {
			return opErr("elect", url, err)
		}
		if *value != "" {
			opts.Data = []byte(*value)
		}
		e := elector{sess: sess, key: key, opts: opts}
		if argv == nil {
			return c.electHold(ctx, e, url, *asJSON)
		}
		return c.electRun(ctx, e, url, argv, *grace, *value)
	}
}

// sayLeader is elect's OnNewLeader: under -v, who leads now.
func (c *cli) sayLeader(l election.Leader) {
	c.probe.set(func(p *probe) { p.holder, p.token = l.Holder, l.Token })
	if !c.verbose || l.Self {
		return
	}
	msg := fmt.Sprintf("leader: %s (token %d)", showHolder(l.Holder), l.Token)
	if len(l.Data) > 0 {
		msg += " value=" + valueText(string(l.Data))
	}
	c.log.Info(msg)
}

// elector is what elect campaigns with: the lease at key in sess.
type elector struct {
	sess *objlease.Session
	key  string
	opts objlease.Options
}

// campaign runs for leader with e until ctx ends: lead is each term of
// leadership, with the lease already shown to --http, and sayLeader hears
// of every leader.
func (c *cli) campaign(ctx context.Context, e elector, lead func(lctx context.Context, l *objlease.Lease)) error {
	el, err := election.New(e.sess, e.key, e.opts, election.Config{
		OnStartedLeading: func(lctx context.Context, l *objlease.Lease) {
			c.probe.set(func(p *probe) { p.lease = l })
			lead(lctx, l)
		},
		OnNewLeader: c.sayLeader,
	})
	if err != nil {
		return err
	}
	return el.Run(ctx)
}

// electHold campaigns until signalled, printing a line each time this
// process is elected and each time it loses the leadership.
func (c *cli) electHold(ctx context.Context, e elector, url string, asJSON bool) error {
	var mu sync.Mutex
	var resigned bool // signalled while leading
	var printErr error
	ectx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	say := func(event string, l *objlease.Lease) {
		r := l.Record()
		ev := electEvent{Event: event, Key: l.Key(), URL: url, Token: l.Token(), Holder: r.Holder, Value: string(r.Data),
			TTLMillis: r.TTLMillis, AcquiredAt: r.AcquiredAt}
		var err error
		if asJSON {
			err = c.printJSON(ev)
		} else {
			err = c.printText(ev.text())
		}
		if err != nil {
			mu.Lock()
			printErr = err
			mu.Unlock()
			stop(err)
		}
	}
	err := c.campaign(ectx, e, func(lctx context.Context, l *objlease.Lease) {
		say("elected", l)
		<-lctx.Done()
		if cause := context.Cause(lctx); errors.Is(cause, objlease.ErrLeaseLost) {
			c.log.Error(fmt.Sprintf("%s; campaigning again", reason(l.Err(), url)))
			say("lost", l)
			return
		}
		if _, ok := interrupted(ctx); ok {
			mu.Lock()
			resigned = true
			mu.Unlock()
		}
	})
	mu.Lock()
	defer mu.Unlock()
	switch {
	case printErr != nil:
		return opErr("elect", url, printErr)
	case err != nil:
		return opErr("elect", url, err)
	case resigned:
		return nil
	}
	if i, ok := interrupted(ctx); ok {
		return opErr("elect", url, i)
	}
	return nil
}

// text is an elect event as one line.
func (ev electEvent) text() string {
	s := fmt.Sprintf("%s  token=%d  holder=%s", ev.Event, ev.Token, showHolder(ev.Holder))
	if ev.Value != "" {
		s += "  value=" + valueText(ev.Value)
	}
	return s
}

// electRun campaigns and runs argv in each term of leadership, until argv
// exits by itself or a signal ends the campaign.
func (c *cli) electRun(ctx context.Context, e elector, url string, argv []string, grace time.Duration, value string) error {
	// Signals are elect's to route, not a reason to stop campaigning:
	// while a command runs they go to it, else they end the campaign.
	ectx, stop := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stop(nil)
	var mu sync.Mutex
	var running chan os.Signal // the running command's signals; nil if none runs
	var result error           // how elect ends, once a command has ended it
	go func() {
		for {
			select {
			case s := <-c.signals:
				mu.Lock()
				if running != nil {
					select {
					case running <- s:
					default:
					}
				} else {
					stop(interrupt{s})
				}
				mu.Unlock()
			case <-ectx.Done():
				return
			}
		}
	}()
	finish := func(err error) {
		mu.Lock()
		result = err
		mu.Unlock()
		stop(errElectDone)
	}
	env := []string{"OBJLEASE_LEADER_VALUE=" + value}
	err := c.campaign(ectx, e, func(lctx context.Context, l *objlease.Lease) {
		if lctx.Err() != nil {
			return // stepping down already
		}
		t, err := c.startHolding(url, l, argv, grace, env...)
		if err != nil {
			finish(startErr("elect", url, argv[0], err))
			return
		}
		sigs := make(chan os.Signal, 8)
		mu.Lock()
		running = sigs
		mu.Unlock()
		j := &job.Job{Lease: l, Task: t, Grace: grace, Signals: sigs, Stop: lctx.Done(), Logger: c.log,
			Stopping: func(cause error) {
				if cause == nil {
					cause = l.Err() // the lease's end and lctx's come together
				}
				why := context.Cause(lctx).Error()
				if cause != nil {
					why = reason(cause, url)
				} else if i, ok := interrupted(ectx); ok {
					why = i.Error()
				}
				c.log.Error(fmt.Sprintf("%s; sending SIGTERM to the command (SIGKILL after --grace %v)", why, grace))
			}}
		res := j.Run()
		mu.Lock()
		running = nil
		mu.Unlock()
		if res.Outcome == job.Lost {
			// Whatever its status: a command stopped, or seen to end
			// after the validity, is not a term that ended by itself.
			c.log.Warn(fmt.Sprintf("command stopped (%s); campaigning again", res.Exit.How))
			return
		}
		if res.Outcome != job.NotStarted {
			// Ended by itself (or by a signal passed on): no new term,
			// and the lease released now, so that its outcome decides
			// the exit status.
			stop(errElectDone)
			res.ReleaseErr = c.release(l)
		}
		finish(c.jobErr("elect", url, argv[0], res, false))
	})
	mu.Lock()
	defer mu.Unlock()
	switch cause := context.Cause(ectx); {
	case errors.Is(cause, errElectDone):
		return result
	case err != nil:
		return opErr("elect", url, err)
	default:
		return opErr("elect", url, cause)
	}
}

// errElectDone ends a campaign whose command has ended it.
var errElectDone = errors.New("the command ended the campaign")

// listenLeader prints the leader at once and then every change of leader,
// until ctx ends. It reads in objlease.Client.Watch: on the leader's
// renewal phase while a leader holds the lease, every PollInterval
// otherwise, with backoff while the store fails; an error that waiting
// cannot cure ends it.
func (c *cli) listenLeader(ctx context.Context, cl *objlease.Client, asJSON bool) error {
	var last *leaderEvent
	err := cl.Watch(ctx, func(st *objlease.Status) error {
		ev := leaderOf(st)
		c.probe.set(func(p *probe) {
			p.holder, p.token = "", 0
			if ev.Event == "leader" {
				p.holder, p.token = ev.Holder, ev.Token
			}
		})
		if last != nil && ev.Event == last.Event && ev.Holder == last.Holder && ev.Token == last.Token {
			return nil
		}
		last = &ev
		if asJSON {
			return c.printJSON(ev)
		}
		return c.printText(ev.text())
	})
	if err == nil && ctx.Err() != nil {
		if _, ok := interrupted(ctx); !ok {
			return context.Cause(ctx)
		}
	}
	return err
}

// leaderOf is who leads according to st, as an event seen now.
func leaderOf(st *objlease.Status) leaderEvent {
	ev := leaderEvent{Time: time.Now().UTC(), Event: "no-leader", Key: st.Key, State: "absent"}
	r := st.Record
	if r == nil {
		return ev
	}
	ev.State, ev.Token = stateOf(st), r.Token
	if r.State != objlease.StateHeld {
		return ev
	}
	ev.Holder = r.Holder
	if !st.Expired {
		ev.Event, ev.Value, ev.Since = "leader", string(r.Data), r.AcquiredAt
	}
	return ev
}

// text is a --listen event as one line.
func (ev leaderEvent) text() string {
	if ev.Event != "leader" {
		s := fmt.Sprintf("%s  no leader  state=%s", stamp(ev.Time), ev.State)
		if ev.State != "absent" {
			s += fmt.Sprintf("  token=%d", ev.Token)
		}
		if ev.Holder != "" {
			s += "  holder=" + showHolder(ev.Holder)
		}
		return s
	}
	s := fmt.Sprintf("%s  leader     holder=%s  token=%d", stamp(ev.Time), showHolder(ev.Holder), ev.Token)
	if ev.Value != "" {
		s += "  value=" + valueText(ev.Value)
	}
	if !ev.Since.IsZero() {
		s += "  since=" + stamp(ev.Since)
	}
	return s
}

// valueText is a leader's value as one word: quoted if it has spaces,
// quotes, "=" or characters that do not print.
func valueText(v string) string {
	if strings.ContainsAny(v, " \"=\\") || strings.IndexFunc(v, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return strconv.Quote(v)
	}
	return v
}

// printText prints one line on stdout.
func (c *cli) printText(line string) error {
	_, err := fmt.Fprintln(c.stdout, line)
	return err
}
