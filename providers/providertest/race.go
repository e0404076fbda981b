package providertest

// This file holds the race tests: many writers released together on one
// key, of whom exactly one may win each round.

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/objlease/objlease/providers"
)

// race runs fn once per racer, all released together, and returns the
// results in racer order.
func race[R any](racers int, fn func(i int) R) []R {
	out := make([]R, racers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			<-start
			out[i] = fn(i)
		})
	}
	close(start)
	wg.Wait()
	return out
}

type writeOutcome struct {
	res  providers.WriteResult
	err  error
	data []byte
}

// judgeRace fails t unless exactly one outcome succeeded and every other lost
// with ErrPrecondition or ErrConflict; it returns the winner. With
// Config.UnknownLosers a racer answered ErrUnknownOutcome is judged by
// reading key: it won if the object holds what it wrote (and nobody was
// told they won), else it lost.
func (s *suite) judgeRace(t *testing.T, op, key string, round int, outs []writeOutcome) (winner writeOutcome, precondition, conflict int) {
	t.Helper()
	wins := 0
	var unknown []writeOutcome
	for _, o := range outs {
		switch {
		case o.err == nil:
			wins++
			winner = o
		case errors.Is(o.err, providers.ErrPrecondition):
			precondition++
		case errors.Is(o.err, providers.ErrConflict):
			conflict++
		case s.UnknownLosers && errors.Is(o.err, providers.ErrUnknownOutcome):
			unknown = append(unknown, o)
		default:
			t.Errorf("round %d: %s %q: unexpected error: %v", round, op, key, o.err)
		}
		if o.err != nil {
			checkError(t, o.err, op, key)
		}
	}
	if len(unknown) > 0 {
		got := s.get(t, key)
		for _, o := range unknown {
			if bytes.Equal(got.Data, o.data) {
				if wins > 0 {
					t.Fatalf("round %d: %s %q: a racer answered %v holds the object, and another was told it won", round, op, key, o.err)
				}
				wins++
				winner = writeOutcome{res: providers.WriteResult{Version: got.Version}, data: o.data}
			}
		}
	}
	if wins != 1 {
		t.Fatalf("round %d: %s %q: %d winners among %d racers, want exactly 1", round, op, key, wins, len(outs))
	}
	return winner, precondition, conflict
}

func (s *suite) testCreateRace(t *testing.T) {
	var precondition, conflict int
	for round := range s.Rounds {
		key := s.key(fmt.Sprintf("createrace/%d", round))
		s.cleanup(t, key)
		outs := race(s.Racers, func(i int) writeOutcome {
			data := fmt.Appendf(nil, "round %d racer %d", round, i)
			res, err := s.Bucket.Create(t.Context(), key, data, nil)
			return writeOutcome{res, err, data}
		})
		w, p, c := s.judgeRace(t, "create", key, round, outs)
		precondition, conflict = precondition+p, conflict+c
		checkObject(t, s.get(t, key), key, w.data, nil, w.res.Version)
	}
	t.Logf("%d rounds of %d racers: losers got %d ErrPrecondition, %d ErrConflict", s.Rounds, s.Racers, precondition, conflict)
}

func (s *suite) testReplaceRace(t *testing.T) {
	key := s.key("replacerace/obj")
	version := s.create(t, key, []byte("start"), nil).Version
	var precondition, conflict int
	for round := range s.Rounds {
		outs := race(s.Racers, func(i int) writeOutcome {
			data := fmt.Appendf(nil, "round %d racer %d", round, i)
			res, err := s.Bucket.Replace(t.Context(), key, data, nil, version)
			return writeOutcome{res, err, data}
		})
		w, p, c := s.judgeRace(t, "replace", key, round, outs)
		precondition, conflict = precondition+p, conflict+c
		checkObject(t, s.get(t, key), key, w.data, nil, w.res.Version)
		version = w.res.Version
	}
	t.Logf("%d rounds of %d racers: losers got %d ErrPrecondition, %d ErrConflict", s.Rounds, s.Racers, precondition, conflict)
}
