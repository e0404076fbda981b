package main

import (
	"context"
	"fmt"
	"time"

	"github.com/objlease/objlease/objlease"
)

const acquireDetail = `Takes the lease, prints its fencing token on stdout and exits. Nothing renews
the lease afterwards: it expires TTL after it was written unless released
first with "objlease release --holder HOLDER URL", so give --holder (or use
"objlease hold", which renews it until signalled).

--timeout is as for run: by default wait as long as it takes; 0 tries once.
--force overwrites an object at the key that is not an objlease record
once it has been seen unchanged for its TTL, with a token above the highest
one the object, --min-token N or --fenced KEY shows; where none shows one
it refuses (exit 65) rather than start again from token 1.
A waiter reads the record just after each of the holder's renewals (once
per TTL/3) once it has learned when they land; --poll D reads every D
instead. While it waits it says who holds it on stderr (by default on a
terminal, with -v elsewhere), again only when that changes. With -o json it prints {"key","url","token","holder","ttl_ms",
"acquired_at"}.`

// acquisition is what acquire and hold print with -o json.
type acquisition struct {
	Key        string    `json:"key"`
	URL        string    `json:"url"`
	Token      uint64    `json:"token"`
	Holder     string    `json:"holder"`
	TTLMillis  int64     `json:"ttl_ms"`
	AcquiredAt time.Time `json:"acquired_at"`
}

func acquired(url string, l *objlease.Lease) acquisition {
	r := l.Record()
	return acquisition{Key: l.Key(), URL: url, Token: l.Token(), Holder: r.Holder, TTLMillis: r.TTLMillis, AcquiredAt: r.AcquiredAt}
}

func (c *cli) acquireCmd(fs *flagSet) action {
	var lf leaseFlags
	timeout := c.addTakeFlags(fs, &lf)
	asJSON := addOutput(fs)
	return fs.withURL(func(ctx context.Context, url string) error {
		cl, l, err := c.takeAt(ctx, "acquire", &lf, url, timeout)
		if err != nil {
			return err
		}
		defer cl.Store().Close()
		if lf.holder == "" {
			c.log.Warn("no --holder given; release it with --holder " + l.Record().Holder)
		}
		if *asJSON {
			return c.printJSON(acquired(url, l))
		}
		_, err = fmt.Fprintln(c.stdout, l.Token())
		return err
	})
}
