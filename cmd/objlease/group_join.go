package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"time"

	"github.com/objlease/objlease/cmd/objlease/internal/supervise"
	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/job"
	"github.com/objlease/objlease/objlease/shard"
)

// Back-off before a shard's command that failed is run again.
const (
	shardRestartMin = time.Second
	shardRestartMax = time.Minute
)

// groupJoin joins the group at url as lf.holder and runs argv for each
// shard it owns, until a signal ends ctx or an error waiting cannot cure.
func (c *cli) groupJoin(ctx context.Context, lf *leaseFlags, url string, argv []string, grace time.Duration) error {
	if _, err := exec.LookPath(argv[0]); err != nil {
		return startErr("group join", url, argv[0], err)
	}
	store, prefix, err := c.open(ctx, url, false)
	if err != nil {
		return opErr("group join", url, err)
	}
	defer store.Close()
	// A worker of a group with no shards waits for some; say so, or it
	// looks hung.
	if v, err := shard.Describe(ctx, store, prefix); err == nil && len(v.Shards) == 0 {
		c.log.Warn(fmt.Sprintf("the group has no shards yet (nothing under %s): define them with \"objlease group define %s ID...\"; waiting for them", shard.ShardsPrefix(prefix), url))
	}
	sess, opts, err := c.session(store, lf)
	if err != nil {
		return opErr("group join", url, err)
	}
	w, err := shard.New(sess, prefix, opts, shard.Config{Member: lf.holder,
		Work: func(ctx context.Context, s *shard.Shard) { c.shardWork(ctx, url, s, argv, grace) }})
	if err != nil {
		return opErr("group join", url, err)
	}
	c.probe.set(func(p *probe) {
		p.holder, p.shards, p.ending = w.Member(), w.Owned, w.Stopping
		p.ready = func(*probe) (bool, string) { return w.Joined(), "not a member of the group (yet)" }
	})
	c.log.Info("joining the group", slog.String("member", w.Member()))
	if err := w.Run(ctx); err != nil {
		return opErr("group join", url, err)
	}
	c.log.Info("left the group", slog.String("member", w.Member()))
	if i, ok := interrupted(ctx); ok {
		return opErr("group join", url, i)
	}
	return nil
}

// shardWork runs argv for shard s until ctx ends (the shard is handed over,
// its lease lost, or the worker leaves), then stops it: SIGTERM, SIGKILL
// after grace. A command that exits 0 has done the shard and is not run
// again; one that fails is run again after a back-off.
func (c *cli) shardWork(ctx context.Context, url string, s *shard.Shard, argv []string, grace time.Duration) {
	log := c.log.With(slog.String("shard", s.ID), slog.Uint64("token", s.Token()))
	backoff := shardRestartMin
	for {
		// A restart after a back-off in which the lease was lost, or a
		// pause that ran past its validity, would run with a token that is
		// no longer this member's.
		if !stillHeld(ctx, s.Lease) {
			why := "its validity has run out"
			if ctx.Err() != nil {
				why = reason(context.Cause(ctx), "")
			}
			log.Warn(fmt.Sprintf("shard %s is no longer held (%s); its command is not started again", s.ID, why))
			<-ctx.Done()
			return
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdout, cmd.Stderr = c.stdout, c.stderr // stdin: /dev/null
		cmd.Env = append(leaseEnv(url, s.Lease), "OBJLEASE_SHARD="+s.ID)
		t, err := supervise.Start(cmd, supervise.Options{Grace: grace, Lease: s.Lease, Args: supervisorArgs()})
		if err == nil {
			log.Info("shard command started", slog.Int("pid", t.Pid()))
			res := (&job.Job{Lease: s.Lease, Task: t, Grace: grace, Stop: ctx.Done(), Logger: log,
				Stopping: func(cause error) { c.stoppingShard(ctx, log, s, cause, grace) }}).Run()
			err = res.Exit.Err
			switch res.Outcome {
			case job.Done:
				log.Info("shard command exited 0: the shard is done; it is kept, and the command not run again, until the shard moves")
				<-ctx.Done()
				return
			case job.Failed:
				log.Warn(fmt.Sprintf("shard command failed (%s); running it again in %v", res.Exit.How, backoff))
			case job.Lost, job.Interrupted:
				log.Info("shard command stopped (" + res.Exit.How + ")")
				<-ctx.Done()
				return
			}
		}
		if errors.Is(err, objlease.ErrLeaseLost) {
			log.Warn(fmt.Sprintf("shard %s: %v; its command is not started again", s.ID, err))
			<-ctx.Done()
			return
		}
		if err != nil {
			log.Error(fmt.Sprintf("cannot start %s: %v; trying again in %v", argv[0], err, backoff))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, shardRestartMax)
	}
}

// stillHeld reports whether a command may start under l: ctx (l's or
// narrower) has not ended and l's validity has not run out.
func stillHeld(ctx context.Context, l job.Lease) bool {
	return ctx.Err() == nil && l.ValidFor() > 0
}

// stoppingShard logs why the command of shard s is being stopped: its
// lease lost (cause), or the shard handed over (ctx ended).
func (c *cli) stoppingShard(ctx context.Context, log *slog.Logger, s *shard.Shard, cause error, grace time.Duration) {
	if cause == nil {
		cause = s.Lease.Err() // the lease's end and ctx's come together
	}
	if cause != nil {
		log.Error(fmt.Sprintf("shard %s lost: %s; sending SIGTERM to its command (SIGKILL after --grace %v)", s.ID, reason(cause, ""), grace))
		return
	}
	log.Info(fmt.Sprintf("handing shard %s over: sending SIGTERM to its command (SIGKILL after --grace %v)", s.ID, grace), slog.Any("why", context.Cause(ctx)))
}
