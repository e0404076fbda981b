package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/faulty"

	"github.com/objlease/objlease/objlease/fence"
)

// violation is one broken guarantee, by kind so that a test can ask for a
// particular one, and when it happened (0: unknown).
type violation struct {
	kind string
	msg  string
	at   time.Duration
}

// Kinds of violation.
const (
	vRegisterBack   = "register accepted a lower token"
	vCommitBack     = "prefix committed a lower token"
	vRecordBack     = "lease record token went back"
	vTokenTwice     = "token issued twice"
	vOverlap        = "two holders at once"
	vLeaders        = "two leaders' callbacks at once"
	vNotLinear      = "register history not linearizable"
	vCommittedGone  = "committed object missing"
	vRecordFenced   = "fenced write landed on a lease record"
	vMisreported    = "release landed but was reported lost"
	vLateLost       = "own write landed but the lease was reported lost"
	vShardOverlap   = "two workers' Work for one shard at once"
	vShardBack      = "shard output accepted a lower token"
	vContextLate    = "a lease's context outlived its validity"
	overlapSlack    = time.Microsecond // float rounding in clock conversions
	maxHistoryCheck = 4000             // operations; bounds the linearizability search
)

// allKinds lists the kinds in the order reports give them.
var allKinds = []string{vRegisterBack, vCommitBack, vRecordBack, vTokenTwice, vOverlap, vLeaders, vNotLinear, vCommittedGone, vRecordFenced, vMisreported, vLateLost, vShardOverlap, vShardBack, vContextLate}

// check runs every check on a finished run.
//
// An operator's hand delete or tampering legitimately restarts a key's
// history: a lease record deleted by hand is created again from token 1 by
// a client that never saw it, a record whose token was lowered goes on
// from there. So the token checks count per record epoch: the stretch of a
// lease key's history between two operator writes. A token may appear once
// in each epoch; a record's token must not go back within one. Likewise a
// register deleted by hand (a lifecycle rule) forgets its highest token:
// its checks restart there, and its linearizability model treats the
// delete as a write that empties it. A hold that was live when its record
// was deleted by hand cannot stop believing before its next renewal fails,
// just as after Break; it is exempt from the one-holder checks against
// holds whose records landed after the delete, but tampering is no excuse: the library must wait the record
// out before replacing it.
func (w *world) check() []violation {
	var v []violation
	add := func(kind string, at time.Duration, format string, args ...any) {
		v = append(v, violation{kind, fmt.Sprintf(format, args...), at})
	}
	at := func(t time.Time) time.Duration { return t.Sub(w.start) }
	writes := w.audit.writes
	operator := func(a applied) bool { return a.op == "hand-delete" || a.op == "tamper" }

	// What the store applied, in its own order.
	// brokenAt: the holds an operator broke, and where the break landed in
	// writes. A break breaks the hold whose record it replaced: the last
	// one the library wrote before it (an operator's tampering in between
	// may have changed the record's token, not whose record it is).
	brokenAt := map[grant]int{}
	landed := map[string]int{} // a lease record's nonce: where it landed in writes
	for k := range w.nkeys {
		var hiReg, hiCommit, hiRecord uint64
		var regAt, commitAt, recordAt time.Duration
		wasRecord := false // the key holds a lease record (of any schema)
		var current *grant // the hold the library last wrote the lease record for
		for i, a := range writes {
			switch a.key {
			case registerKey(k):
				if a.op == "hand-delete" {
					hiReg = 0
					continue
				}
				tok, _ := strconv.ParseUint(a.metadata[fence.TokenKey], 10, 64)
				if tok < hiReg {
					add(vRegisterBack, at(a.at), "%s: at %v it accepted token %d (%q), after token %d at %v", a.key, at(a.at), tok, a.data, hiReg, regAt)
				}
				if tok >= hiReg {
					hiReg, regAt = tok, at(a.at)
				}
			case manifestKey(prefixKey(k)):
				var m struct{ Token uint64 }
				_ = json.Unmarshal(a.data, &m)
				if m.Token < hiCommit {
					add(vCommitBack, at(a.at), "%s: at %v it committed token %d, after token %d at %v", a.key, at(a.at), m.Token, hiCommit, commitAt)
				}
				if m.Token >= hiCommit {
					hiCommit, commitAt = m.Token, at(a.at)
				}
			case leaseKey(k):
				if _, ok := a.metadata[fence.TokenKey]; ok && !operator(a) && wasRecord {
					add(vRecordFenced, at(a.at), "%s: at %v a fenced write replaced the lease record with %q", a.key, at(a.at), a.data)
				}
				var head struct {
					Schema *int `json:"objlease"`
				}
				wasRecord = a.op != "delete" && a.op != "hand-delete" && json.Unmarshal(a.data, &head) == nil && head.Schema != nil
				var r struct {
					Token         uint64
					Nonce         string
					Holder, State string
				}
				perr := json.Unmarshal(a.data, &r)
				switch {
				case a.op == "hand-delete":
					hiRecord = 0
					continue
				case a.op == "tamper":
					hiRecord = r.Token // 0 if it is no record now
					continue
				case a.op == "delete" || perr != nil:
					continue // the token must still not go back at the next write
				}
				if _, ok := landed[r.Nonce]; !ok {
					landed[r.Nonce] = i
				}
				switch {
				case r.State == "released" && r.Holder == "": // Break writes no holder
					for _, g := range []grant{{k, r.Token - 1}, deref(current)} {
						if _, ok := brokenAt[g]; !ok && g.token > 0 {
							brokenAt[g] = i
						}
					}
					current = nil
				case r.State == "held":
					current = &grant{k, r.Token}
				default:
					current = nil
				}
				if r.Token < hiRecord {
					add(vRecordBack, at(a.at), "%s: at %v it was written with token %d, after token %d at %v", a.key, at(a.at), r.Token, hiRecord, recordAt)
				}
				if r.Token >= hiRecord {
					hiRecord, recordAt = r.Token, at(a.at)
				}
			}
		}
	}

	// Each hold's record epoch, where its record landed in the store's
	// order, and the hand delete (its index in writes) that removed it
	// while it was believed, if one did.
	recEpoch := map[*epoch]int{}
	landedAt := map[*epoch]int{}
	deletedAt := map[*epoch]int{}
	for _, e := range w.epochs {
		key := leaseKey(e.lease)
		li, ok := landed[e.nonce]
		if !ok { // never landed (as far as the audit shows): count from its belief
			li = 0
			for li < len(writes) && at(writes[li].at) < e.from {
				li++
			}
		}
		landedAt[e] = li
		n := 0
		for i, a := range writes {
			if a.key != key || !operator(a) {
				continue
			}
			before := i < li
			if !ok {
				before = at(a.at) < e.from
			}
			if !before {
				n++
				if _, seen := deletedAt[e]; !seen && a.op == "hand-delete" && at(a.at) <= e.end() {
					deletedAt[e] = i
				}
			}
		}
		recEpoch[e] = n
	}
	// outlived reports that x's record was deleted by hand while x was
	// believed, before y's record landed: x cannot know until its next
	// renewal fails, so y may overlap it. Which of the two began believing
	// first does not matter: a grant whose reply comes late is believed
	// only from then, though its record landed (and was deleted) earlier.
	outlived := func(x, y *epoch) bool {
		d, ok := deletedAt[x]
		return ok && landedAt[y] > d
	}
	// brokeBefore reports that an operator broke x, granted before the
	// break, before y's record landed: x may go on, by design, until its
	// holder's next renewal fails.
	brokeBefore := func(x, y *epoch) bool {
		d, ok := brokenAt[grant{x.lease, x.token}]
		return ok && landedAt[x] < d && landedAt[y] > d
	}

	// Every token is granted once in each record epoch.
	type issued struct {
		lease, epoch int
		token        uint64
	}
	granted := map[issued]*epoch{}
	for _, e := range w.epochs {
		// Count epochs from the end: a hold's count is of operator writes
		// after it landed.
		g := issued{e.lease, -recEpoch[e], e.token}
		if o := granted[g]; o != nil {
			add(vTokenTwice, e.from, "%s: token %d granted to p%d at %v and to p%d at %v", leaseKey(e.lease), e.token, o.proc, o.from, e.proc, e.from)
		}
		granted[g] = e
	}

	// No two holders believe at once, except that a hold an operator
	// broke may go on, by design, until its holder's next renewal fails:
	// it may overlap holds with higher tokens, or any later hold if its
	// record was deleted by hand. No two electors' callbacks run at once,
	// with the same exceptions.
	byLease := make([][]*epoch, w.nkeys)
	for _, e := range w.epochs {
		byLease[e.lease] = append(byLease[e.lease], e)
	}
	for k, es := range byLease {
		for i, a := range es {
			for _, b := range es[i+1:] {
				if a.elector != b.elector || !a.believed || !b.believed {
					continue // a lease granted already expired was never believed
				}
				first, second := a, b
				if b.from < a.from {
					first, second = b, a
				}
				if second.from+overlapSlack >= first.end() || outlived(first, second) || outlived(second, first) || brokeBefore(first, second) || brokeBefore(second, first) {
					continue
				}
				if a.elector {
					add(vLeaders, second.from, "%s: p%d (token %d) led from %v to %v; p%d (token %d) started leading at %v, %v before that ended",
						leaseKey(k), first.proc, first.token, first.from, first.end(), second.proc, second.token, second.from, first.end()-second.from)
					continue
				}
				add(vOverlap, second.from, "%s: p%d (token %d) believed from %v to %v; p%d (token %d) from %v, %v before that ended",
					leaseKey(k), first.proc, first.token, first.from, first.end(), second.proc, second.token, second.from, first.end()-second.from)
			}
		}
	}

	// The register is linearizable.
	for k, ops := range w.reg {
		if len(ops) > maxHistoryCheck {
			ops = ops[:maxHistoryCheck]
		}
		if !linearizable(ops) {
			add(vNotLinear, 0, "%s: %d operations admit no order in which each write is accepted iff its token is at least the highest accepted", registerKey(k), len(ops))
		}
	}

	// A release that reports the lease lost (rather than its outcome
	// unknown) did not land.
	for _, r := range w.rels {
		if !errors.Is(r.err, objlease.ErrLeaseLost) || errors.Is(r.err, objlease.ErrAmbiguous) || errors.Is(r.err, providers.ErrUnknownOutcome) {
			continue
		}
		for _, a := range writes {
			if a.key != leaseKey(r.lease) || operator(a) || at(a.at) < r.call || at(a.at) > r.ret {
				continue
			}
			var rec struct {
				Token         uint64
				Holder, State string
			}
			if json.Unmarshal(a.data, &rec) == nil && rec.State == "released" && rec.Holder == r.holder && rec.Token == r.token {
				valid := time.Duration(-1)
				for _, e := range w.epochs {
					if !e.elector && e.lease == r.lease && e.token == r.token && w.procs[e.proc].clients[e.lease].Options().Holder == r.holder {
						valid = e.to
					}
				}
				add(vMisreported, r.ret, "%s: %s's release of token %d landed at %v (its validity, last seen, to %v), but at %v it reported: %v",
					a.key, r.holder, r.token, at(a.at), valid, r.ret, r.err)
				break
			}
		}
	}

	// A lease that ended as lost before its validity ran out was refused
	// because someone else wrote: the record's last write before then is
	// not the holder's own. (A refusal the fault injector made up is
	// indistinguishable from a real one; it is not counted. Nor are
	// processes that share a holder name: their writes look alike. Nor a
	// lease its holder's wall clock, stepped forward, ended early.)
	for _, e := range w.epochs {
		if e.elector || w.cfg.sharedRand || !errors.Is(e.lost, objlease.ErrLeaseLost) || errors.Is(e.lost, faulty.ErrInjected) || e.ended < 0 || e.ended+time.Millisecond >= e.to ||
			w.procs[e.proc].clock.steppedAhead(e.from, e.ended) {
			continue
		}
		var last *applied
		for i, a := range writes {
			if a.key == leaseKey(e.lease) && at(a.at) <= e.ended {
				last = &writes[i]
			}
		}
		var rec struct {
			Token         uint64
			Holder, State string
		}
		if last != nil && !operator(*last) && json.Unmarshal(last.data, &rec) == nil &&
			rec.State == "held" && rec.Holder == w.procs[e.proc].clients[e.lease].Options().Holder && rec.Token == e.token {
			add(vLateLost, e.ended, "%s: p%d's lease (token %d) ended at %v, %v before its validity, as lost (%v), though the record's last write, at %v, was its own",
				leaseKey(e.lease), e.proc, e.token, e.ended, e.to-e.ended, e.lost, at(last.at))
		}
	}

	// A lease's context ends when its validity does.
	w.mu.Lock()
	for _, msg := range w.lateContexts {
		add(vContextLate, 0, "%s", msg)
	}
	w.mu.Unlock()

	// What was committed is there.
	ctx := context.Background()
	for k := range w.nkeys {
		m, err := fence.ReadCommitted(ctx, w.store, prefixKey(k))
		if err != nil {
			continue
		}
		for name, e := range m.Objects {
			if a, err := w.store.Stat(ctx, e.Key); err != nil || a.Version != e.Version {
				add(vCommittedGone, 0, "%s: manifest token %d lists %s as %s version %s, store has %v", prefixKey(k), m.Token, name, e.Key, e.Version, err)
			}
		}
	}
	// The shard group: one Work per shard at a time, and its fenced
	// output never goes back.
	w.mu.Lock()
	v = append(v, checkShardTerms(w.terms)...)
	w.mu.Unlock()
	if w.gaudit != nil {
		w.gaudit.mu.Lock() // a late write's goroutine may have just appended
		gw := w.gaudit.writes
		w.gaudit.mu.Unlock()
		v = append(v, checkShardWrites(gw, w.start)...)
	}
	return v
}

// manifestKey is where fence.Batch keeps a prefix's manifest: beside the
// token directories.
func manifestKey(prefix string) string {
	return strings.TrimSuffix(fence.TokenDir(prefix, 0), fmt.Sprintf("%020d/", 0)) + "manifest.json"
}

// The register's sequential specification: a write (or a fenced delete,
// which leaves a tombstone keeping its token) is accepted iff its token is
// at least the highest accepted so far; a refused write saw that highest
// token; a read returns the last accepted write, or nothing after a delete;
// an operator's delete by hand empties the register and forgets its token.
type regState struct {
	present bool   // it has content (no tombstone)
	token   uint64 // the highest token accepted, 0 if none
	value   string
}

var registerModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{regState{}} },
	Step: func(state, input, output any) []any {
		s, op := state.(regState), input.(regOp)
		switch {
		case op.wipe:
			return []any{regState{}}
		case !op.write:
			if op.found == s.present && (!s.present || op.token == s.token && op.value == s.value) {
				return []any{s}
			}
			return nil
		}
		next := regState{!op.del, op.token, op.value}
		ok := op.token >= s.token
		switch op.out {
		case accepted:
			if ok {
				return []any{next}
			}
		case refused:
			if !ok && op.highest == s.token {
				return []any{s}
			}
		case failed:
			return []any{s}
		case unknown:
			if ok {
				return []any{s, next}
			}
			return []any{s}
		}
		return nil
	},
	Equal: func(a, b any) bool { return a.(regState) == b.(regState) },
	DescribeOperation: func(input, _ any) string {
		op := input.(regOp)
		switch {
		case op.wipe:
			return "operator deleted it by hand"
		case op.del:
			return fmt.Sprintf("p%d delete(token %d) %v", op.proc, op.token, op.out)
		case op.write:
			return fmt.Sprintf("p%d put(token %d, %q) %v", op.proc, op.token, op.value, op.out)
		}
		return fmt.Sprintf("p%d get() token %d %q", op.proc, op.token, op.value)
	},
}

// linearizable checks ops. A write of unknown outcome may take effect
// after its caller gave up on it (a request held up on its way to the
// store), so its return is left open, as if it never returned.
func linearizable(ops []regOp) bool {
	hist := make([]porcupine.Operation, len(ops))
	for i, op := range ops {
		ret := int64(op.ret)
		if op.write && op.out == unknown {
			ret = math.MaxInt64
		}
		hist[i] = porcupine.Operation{ClientId: op.proc + 1, Input: op, Output: op, Call: int64(op.call), Return: ret}
	}
	return porcupine.CheckOperations(registerModel.ToModel(), hist)
}

// deref returns *g, or the zero grant for nil.
func deref(g *grant) grant {
	if g == nil {
		return grant{}
	}
	return *g
}
