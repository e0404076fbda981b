package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/objlease/objlease/providers"
)

// TestMain makes the test binary double as the objlease command: testscript
// installs a copy named objlease on $PATH, and the scripts and the tests
// below run it as a separate process.
func TestMain(m *testing.M) {
	// A binary built with -race sleeps 1 s at exit by default; the tests
	// run it a hundred times. testscript passes GORACE on to scripts.
	if g := os.Getenv("GORACE"); !strings.Contains(g, "atexit_sleep_ms") {
		os.Setenv("GORACE", strings.TrimSpace(g+" atexit_sleep_ms=0"))
	}
	testscript.Main(m, map[string]func(){
		"objlease": main,
	})
}

func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exitcode": cmdExitcode,
			"putobj":   cmdPutobj,
			"jsonkeys": cmdJSONKeys,
			"jsonlist": cmdJSONList,
			"waitfor":  cmdWaitfor,
		},
		Condition: condition,
	})
}

// condition answers the scripts' own conditions:
//
//	[rofs]   this process may mount a read-only tmpfs in a mount namespace
//	         of its own (root, unshare and mount work here)
//	[nodac]  this process runs as root and setpriv can take from a command
//	         the capabilities that let root ignore permission bits
func condition(cond string) (bool, error) {
	switch cond {
	case "rofs":
		rofsOnce.Do(func() {
			dir, err := os.MkdirTemp("", "rofs")
			if err != nil {
				return
			}
			defer os.Remove(dir)
			rofsOK = os.Geteuid() == 0 && exec.Command("unshare", "-m", "mount", "-t", "tmpfs", "-o", "ro", "tmpfs", dir).Run() == nil
		})
		return rofsOK, nil
	case "nodac":
		return os.Geteuid() == 0 && exec.Command("setpriv", "--bounding-set=-dac_override,-dac_read_search", "true").Run() == nil, nil
	}
	return false, fmt.Errorf("unknown condition %q", cond)
}

var (
	rofsOnce sync.Once
	rofsOK   bool
)

// cmdExitcode runs a program like exec and checks its exit status:
//
//	exitcode N program [args...]
func cmdExitcode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exitcode N program [args...]")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("%s: %v", args[1], err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", args[1], got, want)
	}
}

// cmdPutobj creates (or overwrites, as a foreign writer would) an object
// through the store a URL names, so that a script can put a foreign or
// malformed object where a lease would be:
//
//	putobj URL file
func cmdPutobj(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: putobj URL file")
	}
	store, key, err := providers.Open(context.Background(), args[0])
	ts.Check(err)
	defer store.Close()
	ctx := context.Background()
	data := []byte(ts.ReadFile(args[1]))
	_, err = store.Create(ctx, key, data, nil)
	if errors.Is(err, providers.ErrPrecondition) {
		a, serr := store.Stat(ctx, key)
		ts.Check(serr)
		_, err = store.Replace(ctx, key, data, nil, a.Version)
	}
	ts.Check(err)
}

// cmdJSONKeys checks that stdout (stderr with -stderr) holds one or more
// lines, each a JSON object with every one of the keys:
//
//	jsonkeys [-stderr] key...
func cmdJSONKeys(ts *testscript.TestScript, neg bool, args []string) {
	name := "stdout"
	if len(args) > 0 && args[0] == "-stderr" {
		name, args = "stderr", args[1:]
	}
	if neg || len(args) == 0 {
		ts.Fatalf("usage: jsonkeys [-stderr] key...")
	}
	out := strings.TrimSuffix(ts.ReadFile(name), "\n")
	if out == "" {
		ts.Fatalf("%s is empty", name)
	}
	for i, line := range strings.Split(out, "\n") {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &obj); err != nil {
			ts.Fatalf("%s line %d is not a JSON object: %v: %s", name, i+1, err, line)
		}
		for _, k := range args {
			if _, ok := obj[k]; !ok {
				ts.Fatalf("%s line %d has no key %q: %s", name, i+1, k, line)
			}
		}
	}
}

// cmdJSONList checks that stdout is exactly one JSON document, a list as
// kubectl prints one, {"kind":KIND,"items":[...]}, with at least one item,
// each an object with every one of the keys:
//
//	jsonlist KIND key...
func cmdJSONList(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: jsonlist KIND key...")
	}
	dec := json.NewDecoder(strings.NewReader(ts.ReadFile("stdout")))
	var doc struct {
		Kind  string                       `json:"kind"`
		Items []map[string]json.RawMessage `json:"items"`
	}
	if err := dec.Decode(&doc); err != nil {
		ts.Fatalf("stdout is not a JSON list: %v", err)
	}
	if dec.More() {
		ts.Fatalf("stdout holds more than one JSON document")
	}
	if doc.Kind != args[0] {
		ts.Fatalf("stdout is a %q, want a %q", doc.Kind, args[0])
	}
	if len(doc.Items) == 0 {
		ts.Fatalf("the %s has no items", doc.Kind)
	}
	for i, item := range doc.Items {
		for _, k := range args[1:] {
			if _, ok := item[k]; !ok {
				ts.Fatalf("item %d has no key %q", i, k)
			}
		}
	}
}

// cmdWaitfor waits until a file (written by a background command) has a
// line matching a regular expression, and fails after a minute:
//
//	waitfor file regexp
func cmdWaitfor(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: waitfor file regexp")
	}
	re, err := regexp.Compile("(?m)" + args[1])
	ts.Check(err)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(ts.MkAbs(args[0]))
		if re.Match(b) {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("%s has no line matching %q after a minute:\n%s", args[0], args[1], b)
		}
	}
}
