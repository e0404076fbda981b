package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/election"
)

// newElector is an elector process's Elector, on a session of its own on
// the process's clock and seeded by rnd, as every other client.
func newElector(p *proc, opts objlease.Options, rnd *rand.Rand) (*election.Elector, error) {
	sess, err := objlease.NewSession(p.store, objlease.SessionOptions{Clock: p.clock.lib, Rand: rnd})
	if err != nil {
		return nil, err
	}
	return election.New(sess, leaseKey(p.w.cfg.leases), opts, election.Config{OnStartedLeading: p.lead})
}

// campaign is an elector process: it campaigns with its election.Elector
// for the election's lease, steps down now and then (Resign, or by ending
// Run's context) and campaigns again with the same Elector, whose client
// keeps what it has observed of the record.
func (p *proc) campaign() {
	w := p.w
	e := p.elector
	for w.now() < w.cfg.duration {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		var runErr error
		go func() {
			defer close(done)
			runErr = e.Run(ctx)
		}()
		w.count("elector")
		p.sleep(5*time.Second + time.Duration(p.rnd.Int64N(int64(time.Minute))))
		resigned := p.rnd.IntN(4) != 0
		if resigned {
			e.Resign()
		} else {
			cancel()
		}
		w.logf(p, "elector stepping down")
		<-done
		cancel()
		if resigned && runErr != nil {
			// Run had returned on its own (a permanent error), so the
			// Resign may be waiting for the next Run: drop it, as a fresh
			// Elector would have. With its context ended, this Run sends
			// nothing.
			_ = e.Run(ctx)
		}
		w.logf(p, "elector stopped")
		p.sleep(time.Duration(p.rnd.Int64N(int64(3 * time.Second))))
	}
}

// lead is an elector's OnStartedLeading: it keeps acting on what the
// leader owns (fenced writes to the election's register, pausing before
// some of them) until its context ends, then returns. Its term runs until
// it returns; if the lease was lost rather than given up, only until the
// context ended, which is all the library promises then.
func (p *proc) lead(ctx context.Context, l *objlease.Lease) {
	w := p.w
	k := w.cfg.leases
	ep := &epoch{proc: p.id, lease: k, token: l.Token(), nonce: l.Record().Nonce, from: w.now(), elector: true, ended: -1, believed: true}
	var cancelled atomic.Int64
	cancelled.Store(-1)
	stop := context.AfterFunc(ctx, func() { cancelled.Store(int64(w.now())) })
	defer stop()
	w.mu.Lock()
	w.epochs = append(w.epochs, ep)
	w.mu.Unlock()
	w.count("elector term")
	w.logf(p, "leading %s token %d", leaseKey(k), ep.token)
	// A lease granted already expired is ended by its validity watcher at
	// this very instant; let that happen first, whichever goroutine runs
	// first, so that the run stays a function of its seed.
	time.Sleep(time.Microsecond)
	var last string
	for ctx.Err() == nil {
		w.fenced(p, p.cbRnd, k, ep.token, p.cbRnd.IntN(5) == 0, &last)
		p.sleep(50*time.Millisecond + time.Duration(p.cbRnd.Int64N(int64(2*time.Second))))
	}
	end := w.now()
	if c := time.Duration(cancelled.Load()); errors.Is(l.Err(), objlease.ErrLeaseLost) && c >= 0 && c < end {
		end = c
	}
	w.mu.Lock()
	ep.to = end
	w.mu.Unlock()
	w.logf(p, "stopped leading %s token %d (%v)", leaseKey(k), ep.token, l.Err())
}

// acts are the operator's kinds of action.
type acts uint8

const (
	actDelete   acts = 1 << iota // delete a lease record by hand
	actTamper                    // lower a record's token, bump its schema, garble it
	actMax                       // set a record's token near the maximum
	actRegister                  // delete a fenced register by hand (a lifecycle rule)
	allActs     = actDelete | actTamper | actMax | actRegister
)

// operate is an operator (or a lifecycle rule) acting on the store behind
// the library's back: deleting a lease record or a fenced register by
// hand, tampering with a record.
func (w *world) operate(wg *sync.WaitGroup, rnd *rand.Rand) {
	defer wg.Done()
	mean := time.Duration(float64(time.Minute) / w.cfg.operator)
	keys := w.cfg.leases
	if w.cfg.electors > 0 {
		keys++
	}
	for {
		time.Sleep(1 + time.Duration(rnd.Int64N(int64(2*mean))))
		if w.calm.Load() || w.now() > w.cfg.duration-w.cfg.ttl {
			return
		}
		k := rnd.IntN(keys)
		switch a := rnd.IntN(6); {
		case a < 2 && w.cfg.acts&actDelete != 0:
			w.handDelete(leaseKey(k), -1)
		case a == 2 && w.cfg.acts&actTamper != 0:
			w.tamper(k, "token lowered", rnd)
		case a == 3 && w.cfg.acts&actTamper != 0:
			w.tamper(k, []string{"schema bumped", "garbage"}[rnd.IntN(2)], rnd)
		case a == 4 && w.cfg.acts&actMax != 0:
			w.tamper(k, "token near the maximum", rnd)
		case a == 5 && w.cfg.acts&actRegister != 0:
			w.handDelete(registerKey(k), k)
		}
	}
}

// handDelete deletes key whatever its version; reg >= 0 names the lease
// whose register it is.
func (w *world) handDelete(key string, reg int) {
	ctx := operatorCtx(context.Background(), "hand-delete")
	a, err := w.store.Stat(ctx, key)
	if err != nil {
		return
	}
	call := w.now()
	if err := w.store.Delete(ctx, key, a.Version); err != nil {
		w.logf(nil, "operator: delete %s: %v", key, err)
		return
	}
	w.count("operator hand-delete")
	w.logf(nil, "operator: deleted %s by hand", key)
	if reg >= 0 {
		w.mu.Lock()
		w.reg[reg] = append(w.reg[reg], regOp{proc: -1, call: call, ret: w.now(), wipe: true})
		w.mu.Unlock()
	}
}

// tamper rewrites lease k's record behind the library's back.
func (w *world) tamper(k int, how string, rnd *rand.Rand) {
	ctx := operatorCtx(context.Background(), "tamper")
	key := leaseKey(k)
	obj, err := w.store.Get(ctx, key, 1<<20)
	if err != nil {
		return
	}
	var rec map[string]any
	dec := json.NewDecoder(bytes.NewReader(obj.Data))
	dec.UseNumber()
	if dec.Decode(&rec) != nil {
		return // already not a record
	}
	tok, _ := rec["token"].(json.Number).Int64()
	switch how {
	case "token lowered":
		if tok <= 1 {
			return
		}
		rec["token"] = 1 + rnd.Int64N(tok-1)
	case "schema bumped":
		rec["objlease"] = 2
	case "token near the maximum":
		rec["token"] = uint64(math.MaxUint64) - uint64(rnd.IntN(2))
	}
	data, _ := json.Marshal(rec)
	if how == "garbage" {
		data = []byte("not a lease record\n")
	}
	if _, err := w.store.Replace(ctx, key, data, obj.Metadata, obj.Version); err != nil {
		w.logf(nil, "operator: tamper with %s: %v", key, err)
		return
	}
	w.count("operator tamper")
	w.logf(nil, "operator: tampered with %s: %s", key, how)
}
