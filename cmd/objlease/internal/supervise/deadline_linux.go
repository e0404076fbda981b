package supervise

import (
	"bufio"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// readDeadlines sends each validity end that run writes on f (one
// CLOCK_BOOTTIME reading in nanoseconds a line) and closes the channel
// when run closes f or dies.
func readDeadlines(f *os.File) <-chan time.Duration {
	ends := make(chan time.Duration)
	go func() {
		defer close(ends)
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if n, err := strconv.ParseInt(sc.Text(), 10, 64); err == nil {
				ends <- time.Duration(n)
			}
		}
	}()
	return ends
}

// A bootAlarm fires on c at a CLOCK_BOOTTIME reading: a timerfd, which
// fires on time across a suspend (Go's timers count CLOCK_MONOTONIC,
// which stops while the machine sleeps). Without one it fires every
// second and the caller checks the time.
type bootAlarm struct {
	c    chan struct{}
	tfd  *os.File // nil: the once-a-second fallback
	fd   int      // tfd's descriptor (tfd.Fd would make it blocking)
	stop chan struct{}
}

func newBootAlarm() (*bootAlarm, error) {
	a := &bootAlarm{c: make(chan struct{}, 1), stop: make(chan struct{})}
	fd, err := unix.TimerfdCreate(unix.CLOCK_BOOTTIME, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		go a.tick()
		return a, err
	}
	a.fd, a.tfd = fd, os.NewFile(uintptr(fd), "timerfd")
	go a.read()
	return a, nil
}

// set arms the alarm for end; a moment already past fires it at once.
func (a *bootAlarm) set(end time.Duration) {
	if a.tfd == nil {
		return
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(max(int64(end), 1))}
	if err := unix.TimerfdSettime(a.fd, unix.TFD_TIMER_ABSTIME, &spec, nil); err != nil {
		a.fire() // the caller checks the time and sets it again
	}
}

func (a *bootAlarm) read() {
	var buf [8]byte
	for {
		if _, err := a.tfd.Read(buf[:]); err != nil {
			return // closed
		}
		a.fire()
	}
}

func (a *bootAlarm) tick() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			a.fire()
		case <-a.stop:
			return
		}
	}
}

func (a *bootAlarm) fire() {
	select {
	case a.c <- struct{}{}:
	default:
	}
}

func (a *bootAlarm) close() {
	close(a.stop)
	if a.tfd != nil {
		a.tfd.Close()
	}
}
