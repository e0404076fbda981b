package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

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
	vNotLinear      = "register history not linearizable"
	vCommittedGone  = "committed object missing"
	overlapSlack    = time.Microsecond // float rounding in clock conversions
	maxHistoryCheck = 4000             // operations; bounds the linearizability search
)

// check runs every check on a finished run.
func (w *world) check() []violation {
	var v []violation
	add := func(kind string, at time.Duration, format string, args ...any) {
		v = append(v, violation{kind, fmt.Sprintf(format, args...), at})
	}
	at := func(t time.Time) time.Duration { return t.Sub(w.start) }

	// What the store applied, in its own order.
	broken := map[grant]bool{} // holds an operator broke
	for k := range w.cfg.leases {
		var hiReg, hiCommit, hiRecord uint64
		var regAt, commitAt, recordAt time.Duration
		for _, a := range w.audit.writes {
			switch a.key {
			case registerKey(k):
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
				if a.op == "delete" {
					continue // the token must still not go back at the next write
				}
				var r struct {
					Token         uint64
					Holder, State string
				}
				_ = json.Unmarshal(a.data, &r)
				if r.State == "released" && r.Holder == "" { // Break writes no holder
					broken[grant{k, r.Token - 1}] = true
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

	// Every token is granted once.
	granted := map[grant]*epoch{}
	for _, e := range w.epochs {
		g := grant{e.lease, e.token}
		if o := granted[g]; o != nil {
			add(vTokenTwice, e.from, "%s: token %d granted to p%d at %v and to p%d at %v", leaseKey(e.lease), e.token, o.proc, o.from, e.proc, e.from)
		}
		granted[g] = e
	}

	// No two holders believe at once, except that a hold an operator
	// broke may go on, by design, until its holder's next renewal fails:
	// it may overlap holds with higher tokens.
	byLease := make([][]*epoch, w.cfg.leases)
	for _, e := range w.epochs {
		byLease[e.lease] = append(byLease[e.lease], e)
	}
	for k, es := range byLease {
		for i, a := range es {
			for _, b := range es[i+1:] {
				first, second := a, b
				if b.from < a.from {
					first, second = b, a
				}
				lower := min(a.token, b.token)
				if second.from+overlapSlack < first.end() && !(broken[grant{k, lower}] && a.token != b.token) {
					add(vOverlap, second.from, "%s: p%d (token %d) believed from %v to %v; p%d (token %d) from %v, %v before that ended",
						leaseKey(k), first.proc, first.token, first.from, first.end(), second.proc, second.token, second.from, first.end()-second.from)
				}
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

	// What was committed is there.
	ctx := context.Background()
	for k := range w.cfg.leases {
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
	return v
}

// manifestKey is where fence.Batch keeps a prefix's manifest: beside the
// token directories.
func manifestKey(prefix string) string {
	return strings.TrimSuffix(fence.TokenDir(prefix, 0), fmt.Sprintf("%020d/", 0)) + "manifest.json"
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
