package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/objlease/objlease/objlease"
)

const holdDetail = `Takes the lease (waiting as run does), prints its fencing token on stdout,
then keeps it renewed (every TTL/3) until it is sent SIGINT, SIGTERM or
SIGHUP, when it releases the lease and exits 0: "etcdctl lock NAME" for a
shell script that does its own work under the lease. With -o json it prints
one JSON object, {"key","url","token","holder","ttl_ms","acquired_at"}.

If the lease is lost (a renewal was refused because the record changed, or
no renewal succeeded before its validity ended), hold says why on stderr and
exits 76: whatever the script is doing is no longer covered.

  coproc objlease hold --holder deploy s3://ops/leases/deploy
  read -r token <&"${COPROC[0]}"
  ./deploy --fencing-token "$token"
  kill "$COPROC_PID"; wait "$COPROC_PID"

Not acquired within --timeout: exit 75. A signal that arrives while it
still waits for the lease ends the wait with 128+N (143 for SIGTERM): it
never held the lease, so the script must not go on.`

func (c *cli) holdCmd(fs *flagSet) action {
	var lf leaseFlags
	timeout := c.addTakeFlags(fs, &lf)
	asJSON := addOutput(fs)
	return c.serveOneURL(fs, "hold", func(ctx context.Context, url string) error {
		cl, l, err := c.takeAt(ctx, "hold", &lf, url, timeout)
		if err != nil {
			return err
		}
		defer cl.Store().Close()
		c.probe.set(func(p *probe) { p.lease = l })
		if *asJSON {
			err = c.printJSON(acquired(url, l))
		} else {
			_, err = fmt.Fprintln(c.stdout, l.Token())
		}
		if err != nil {
			c.release(l)
			return err
		}
		select {
		case <-ctx.Done():
			// Signalled: the script is done with the lease.
			i, _ := interrupted(ctx)
			c.log.Debug(fmt.Sprintf("%s: releasing the lease", i))
			if err := c.release(l); errors.Is(err, objlease.ErrLeaseLost) {
				return opErr("hold", url, err)
			}
			return nil
		case <-l.Done():
			err := l.Err()
			if !errors.Is(err, objlease.ErrLeaseLost) {
				err = fmt.Errorf("%w: %w", objlease.ErrLeaseLost, err)
			}
			return opErr("hold", url, err)
		}
	})
}

// takeAt opens the lease at url and takes it as --timeout says, for the
// command op; on success the caller closes the client's store.
func (c *cli) takeAt(ctx context.Context, op string, lf *leaseFlags, url string, timeout *waitFlag) (*objlease.Client, *objlease.Lease, error) {
	cl, err := c.client(ctx, lf, url)
	if err != nil {
		return nil, nil, opErr(op, url, err)
	}
	l, err := c.take(ctx, cl, timeout)
	if err != nil {
		cl.Store().Close()
		return nil, nil, opErr(op, url, err)
	}
	return cl, l, nil
}
