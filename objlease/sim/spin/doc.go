// Package spin holds a SPIN model of the lease protocol and the in-place
// fence (lease.pml), and Go tests that replay each counterexample SPIN
// finds with a safeguard switched off against the real code, with the same
// safeguard switched off through internal/safeguards. README.md maps the
// model's steps to the code, argues its abstractions and says how to run
// it; scripts/spin.sh runs every check.
package spin
