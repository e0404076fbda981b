// Package schedstate lets tests that drive a fake clock tell when the
// renewal schedulers running on it have gone back to sleep, so that they
// advance the clock only then. The objlease package fills it in.
package schedstate

// On reports, for the schedulers whose leases run on clk, how many timers
// they hold while asleep and whether every one of them is asleep with no
// renewal in flight. It is nil until the objlease package is loaded.
var On func(clk any) (timers int, idle bool)
