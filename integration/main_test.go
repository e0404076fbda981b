package integration

import (
	"os"
	"os/signal"
	"syscall"
	"testing"

	"github.com/objlease/objlease/integration/emulator"
)

// TestMain stops every emulator when the tests end, also on Ctrl-C or
// SIGTERM. (On Linux the emulators also die with the test binary if it
// crashes: see emulator's sysProcAttr.)
func TestMain(m *testing.M) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sig
		emulator.StopAll()
		removeCLI()
		os.Stderr.WriteString("integration: stopped emulators on " + s.String() + "\n")
		os.Exit(1)
	}()
	code := m.Run()
	emulator.StopAll()
	removeCLI()
	os.Exit(code)
}
