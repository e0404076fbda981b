package shard

// This file holds what a worker learns of its group: the listings of
// members and shards, which members are live, and who holds each shard.

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/providers"
)

// listMembers lists the group's membership records, in key order (some
// stores, S3 Express One Zone, do not list in it).
func (w *Worker) listMembers(ctx context.Context) ([]providers.Attrs, error) {
	var members []providers.Attrs
	err := providers.Walk(ctx, w.store, MembersPrefix(w.prefix), func(a providers.Attrs) error {
		members = append(members, a)
		return nil
	})
	slices.SortFunc(members, func(a, b providers.Attrs) int { return strings.Compare(a.Key, b.Key) })
	return members, err
}

// listShards lists the group's shard records by key, and sets w.ids to
// the shard set: Config.Shards, or the shards listed, in key order.
func (w *Worker) listShards(ctx context.Context) (map[string]providers.Attrs, error) {
	listed := map[string]providers.Attrs{}
	var ids []string
	sp := ShardsPrefix(w.prefix)
	err := providers.Walk(ctx, w.store, sp, func(a providers.Attrs) error {
		listed[a.Key] = a
		ids = append(ids, strings.TrimPrefix(a.Key, sp))
		return nil
	})
	if err != nil {
		return nil, err
	}
	if w.cfg.Shards != nil {
		w.ids = w.cfg.Shards
	} else {
		slices.Sort(ids)
		w.ids = ids
	}
	return listed, nil
}

// liveMembers returns the members whose heartbeat is held and unexpired for
// this worker, this worker included while it is a member, given the listed
// membership records.
//
// The listing alone judges a member that renews: a member's record is
// written only by its member, so a version the listing shows changing at
// the pace of renewals is a live member's, and is not read. A record is
// read only the first time, and when its version has gone unchanged for
// longer than a renewal interval and a round, which is how a member that
// left (its release is the last write) or died shows: then it is judged
// as before, its expiry counted from the version's first sighting, so a
// dead member's shards move no later than when every version was read.
// A settled group thus reads no heartbeat at all, and its requests grow
// with its members, not their square.
func (w *Worker) liveMembers(ctx context.Context, listed []providers.Attrs) ([]string, error) {
	var live []string
	w.suspect = false
	if w.memberLease != nil {
		live = append(live, w.member)
	}
	stale := w.opts.RenewInterval + w.opts.PollInterval
	for _, a := range listed {
		if a.Key == w.memberClient.Key() {
			continue
		}
		p, ok := w.peers[a.Key]
		if !ok {
			c, err := w.client(a.Key)
			if err != nil {
				return nil, err
			}
			p = &peer{c: c}
			w.peers[a.Key] = p
		}
		st, err := p.c.Judge(nil, a)
		var unchanged time.Duration // since this client first saw the version
		if err == nil {
			if unchanged = st.Unchanged; st.Record == nil {
				if p.read && p.held != "" && unchanged <= stale {
					live = append(live, p.held) // renewing: not read
					continue
				}
				st, err = p.c.Inspect(ctx)
				p.read, p.held = err == nil, ""
			}
		}
		switch {
		case errors.Is(err, providers.ErrNotFound):
			continue // gone since it was listed
		case errors.Is(err, objlease.ErrBadRecord), errors.Is(err, objlease.ErrNewerSchema), errors.Is(err, objlease.ErrFencedObject):
			continue // not a member record
		case err != nil:
			return nil, err
		}
		if r := st.Record; r != nil && r.State == objlease.StateHeld && st.ExpiresIn > 0 && r.Holder != w.member {
			live = append(live, r.Holder)
			p.held = r.Holder
			// A live member renews within a renewal interval; one that has
			// not for longer (and a round) may be dead.
			if unchanged > stale {
				w.suspect = true
			}
		}
	}
	sort.Strings(live)
	return slices.Compact(live), nil
}

// scan returns the holder of every shard this worker does not own, ""
// for a shard free to take (absent, released, or expired for this
// worker); a shard that cannot be read is left out. It reads a shard only
// when the listing shows a version it has not read and either fresh is
// set or that version may not be its owner's renewal: the owner last read
// is not a live member, or the version has gone unchanged for half a TTL
// (longer than any live holder waits between renewals: its owner may have
// died, and the version must be read before it can expire). A live
// member's renewals are not read, so a shard that changed hands unseen
// keeps its old holder until a fresh scan, which every move is decided
// on. The versions it does not read still count as seen from the
// listing, for their expiry.
func (w *Worker) scan(ctx context.Context, ids []string, listed map[string]providers.Attrs, live []string, fresh bool) (map[string]string, error) {
	w.mu.Lock()
	mine := map[string]bool{}
	for id := range w.owned {
		mine[id] = true
	}
	w.mu.Unlock()
	holders := map[string]string{}
	for _, id := range ids {
		s, err := w.watch(id)
		if err != nil {
			return nil, err
		}
		if mine[id] {
			// Once it is no longer ours, read what becomes of it.
			s.holder, s.readAt = "", time.Time{}
			holders[id] = w.member
			continue
		}
		a, ok := listed[ShardKey(w.prefix, id)]
		if !ok {
			holders[id], s.holder, s.readAt = "", "", time.Time{}
			continue
		}
		st, err := s.c.Judge(nil, a)
		if err == nil && st.Record == nil {
			now := w.clock.Now()
			if !fresh && !s.readAt.IsZero() && st.Unchanged < w.opts.TTL/2 &&
				s.holder != "" && s.holder != w.member && slices.Contains(live, s.holder) {
				holders[id] = s.holder // its owner's renewal
				continue
			}
			st, err = s.c.Inspect(ctx)
			s.readAt = now
		}
		switch {
		case errors.Is(err, providers.ErrNotFound):
			holders[id], s.holder = "", ""
			continue
		case err != nil:
			if ctx.Err() != nil {
				return nil, err
			}
			s.readAt = time.Time{}
			w.log.Warn("cannot read shard", slog.String("shard", id), slog.Any("err", err))
			continue
		}
		switch {
		case st.Record == nil || st.Record.State != objlease.StateHeld || st.ExpiresIn <= 0:
			s.holder = ""
		case st.Record.Holder == w.member:
			// Ours by name but not by lease (an earlier run, or a write
			// whose reply was lost): taken back once it expires.
			s.holder = "\x00" + w.member
		default:
			s.holder = st.Record.Holder
		}
		holders[id] = s.holder
	}
	return holders, nil
}

func (w *Worker) watch(id string) (*watched, error) {
	if s, ok := w.shards[id]; ok {
		return s, nil
	}
	c, err := w.client(ShardKey(w.prefix, id))
	if err != nil {
		return nil, err
	}
	s := &watched{c: c}
	w.shards[id] = s
	return s, nil
}
