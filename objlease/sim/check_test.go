package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/objlease/objlease/objlease/fence"
)

// violation is one broken guarantee, by kind so that a test can ask for a
// particular one.
type violation struct {
	kind string
	msg  string
}

// Kinds of violation.
const (
	vRegisterBack   = "register accepted a lower token"
	vCommitBack     = "prefix committed a lower token"
	vRecordBack     = "lease record token went back"
	vTokenTwice     = "token issued twice"
	vOverlap        = "two holders at once"
	vNotLinear      = "register history not linearizable"
	vCommittedGone  = "committed object missing"
	overlapSlack    = time.Microsecond // float rounding in clock conversions
	maxHistoryCheck = 4000             // operations; bounds the linearizability search
)

// check runs every check on a finished run.
func (w *world) check() []violation {
	var v []violation
	add := func(kind, format string, args ...any) {
		v = append(v, violation{kind, fmt.Sprintf(format, args...)})
	}
	at := func(t time.Time) time.Duration { return t.Sub(w.start) }

	// What the store applied, in its own order.
	for k := range w.cfg.leases {
		var hiReg, hiCommit, hiRecord uint64
		var regAt, commitAt, recordAt time.Duration
		for _, a := range w.audit.writes {
			switch a.key {
			case registerKey(k):
				tok, _ := strconv.ParseUint(a.metadata[fence.TokenKey], 10, 64)
				if tok < hiReg {
					add(vRegisterBack, "%s: at %v it accepted token %d (%q), after token %d at %v", a.key, at(a.at), tok, a.data, hiReg, regAt)
				}
				if tok >= hiReg {
					hiReg, regAt = tok, at(a.at)
				}
			case prefixKey(k) + ".objlease/manifest.json":
				var m struct{ Token uint64 }
				_ = json.Unmarshal(a.data, &m)
				if m.Token < hiCommit {
					add(vCommitBack, "%s: at %v it committed token %d, after token %d at %v", a.key, at(a.at), m.Token, hiCommit, commitAt)
				}
				if m.Token >= hiCommit {
					hiCommit, commitAt = m.Token, at(a.at)
				}
			case leaseKey(k):
				if a.op == "delete" {
					continue // the token must still not go back at the next write
				}
				var r struct{ Token uint64 }
				_ = json.Unmarshal(a.data, &r)
				if r.Token < hiRecord {
					add(vRecordBack, "%s: at %v it was written with token %d, after token %d at %v", a.key, at(a.at), r.Token, hiRecord, recordAt)
				}
				if r.Token >= hiRecord {
					hiRecord, recordAt = r.Token, at(a.at)
				}
			}
		}
	}

	// Every token is granted once.
	type grant struct {
		lease int
		token uint64
	}
	granted := map[grant]*epoch{}
	for _, e := range w.epochs {
		g := grant{e.lease, e.token}
		if o := granted[g]; o != nil {
			add(vTokenTwice, "%s: token %d granted to p%d at %v and to p%d at %v", leaseKey(e.lease), e.token, o.proc, o.from, e.proc, e.from)
		}
		granted[g] = e
	}

	// No two holders believe at once.
	byLease := make([][]*epoch, w.cfg.leases)
	for _, e := range w.epochs {
		byLease[e.lease] = append(byLease[e.lease], e)
	}
	for k, es := range byLease {
		sort.SliceStable(es, func(i, j int) bool { return es[i].from < es[j].from })
		var last *epoch // the epoch whose belief reaches furthest so far
		for _, e := range es {
			if last != nil && e.from+overlapSlack < last.end() {
				add(vOverlap, "%s: p%d (token %d) believed from %v to %v; p%d (token %d) from %v, %v before that ended",
					leaseKey(k), last.proc, last.token, last.from, last.end(), e.proc, e.token, e.from, last.end()-e.from)
			}
			if last == nil || e.end() > last.end() {
				last = e
			}
		}
	}

	// The register is linearizable.
	for k, ops := range w.reg {
		if len(ops) > maxHistoryCheck {
			ops = ops[:maxHistoryCheck]
		}
		if !linearizable(ops) {
			add(vNotLinear, "%s: %d operations admit no order in which each write is accepted iff its token is at least the highest accepted", registerKey(k), len(ops))
		}
	}

	// What was committed is there.
	ctx := context.Background()
	for k := range w.cfg.leases {
		m, err := fence.ReadCommitted(ctx, w.store, prefixKey(k))
		if err != nil {
			continue
		}
		for name, e := range m.Objects {
			if a, err := w.store.Stat(ctx, e.Key); err != nil || a.Version != e.Version {
				add(vCommittedGone, "%s: manifest token %d lists %s as %s version %s, store has %v", prefixKey(k), m.Token, name, e.Key, e.Version, err)
			}
		}
	}
	return v
}

// The register's sequential specification: a write is accepted iff its
// token is at least the highest accepted so far; a refused write saw that
// highest token; a read returns the last accepted write.
type regState struct {
	present bool
	token   uint64
	value   string
}

var registerModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{regState{}} },
	Step: func(state, input, output any) []any {
		s, op := state.(regState), input.(regOp)
		if !op.write {
			if op.found == s.present && (!s.present || op.token == s.token && op.value == s.value) {
				return []any{s}
			}
			return nil
		}
		next := regState{true, op.token, op.value}
		ok := !s.present || op.token >= s.token
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
		if op.write {
			return fmt.Sprintf("p%d put(token %d, %q) %v", op.proc, op.token, op.value, op.out)
		}
		return fmt.Sprintf("p%d get() token %d %q", op.proc, op.token, op.value)
	},
}

func linearizable(ops []regOp) bool {
	hist := make([]porcupine.Operation, len(ops))
	for i, op := range ops {
		hist[i] = porcupine.Operation{ClientId: op.proc, Input: op, Output: op, Call: int64(op.call), Return: int64(op.ret)}
	}
	return porcupine.CheckOperations(registerModel.ToModel(), hist)
}
