package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"

	"github.com/objlease/objlease/cmd/objlease/internal/bench"
	"github.com/objlease/objlease/cmd/objlease/internal/supervise"
	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/fence"
	"github.com/objlease/objlease/objlease/semaphore"
	"github.com/objlease/objlease/objlease/tick"
	"github.com/objlease/objlease/providers"
)

// Errors of the command's own, each mapped to an exit code below.
var (
	errUsage       = errors.New("usage error")
	errNoLease     = errors.New("no lease at the key")
	errNotAcquired = errors.New("lease not acquired")
	errUnsafe      = errors.New("store does not enforce conditional writes")
	errCannotStart = supervise.ErrCannotStart
	errNotFound    = supervise.ErrNotFound
	// errEmpty: nothing to write where writing nothing would replace data
	// (put of an empty stdin, a commit of a batch with no objects).
	errEmpty = errors.New("nothing to write")
	// errInProcess: a mem:// URL, whose store no other process can see.
	errInProcess = errors.New("in-process store")
	// errLocalInput: standard input could not be read, or not copied into
	// $TMPDIR: this machine's problem, not the store's.
	errLocalInput = errors.New("standard input could not be read or copied")
)

// Exit codes that tests and callers name.
const (
	exitUsage = 64
	exitLost  = 76
	// exitHeld: not acquired, held elsewhere; -E replaces it.
	exitHeld = 75
)

// exitCodes is the one mapping from errors to exit codes; docs/cli.md has
// the same table (a test keeps them in step) and help prints it. The first
// row whose error matches wins; an error no row matches exits 69.
var exitCodes = []struct {
	code    int
	errs    []error
	meaning string
}{
	{0, nil, "success"},
	{78, []error{providers.ErrNoBucket, providers.ErrPermission, providers.ErrWrongEndpoint, fence.ErrPreconditionRefused},
		"the store is not set up as the URL says: the bucket or container does not exist, no credentials were found or they were refused, the endpoint does not serve the store's API, the store refuses writes conditional on an object's current version (run doctor), or (file://) the file system refused access, is mounted read-only or is full"},
	{64, []error{errUsage, providers.ErrBadURL, providers.ErrInvalidKey, objlease.ErrInvalidOptions, tick.ErrBadTick,
		fence.ErrVersionsRepeat, fence.ErrReservedKey, bench.ErrUsage, semaphore.ErrSizeMismatch, errEmpty, errInProcess},
		"usage error: unknown command or flag, missing argument, bad URL or key, a mem:// URL, invalid option, a --slots other than the recorded one; put with a directory on stdin, or with an empty stdin, batch commit or run --commit with nothing written (unless --allow-empty); a command under run waiting for the very lease it runs under; an --http value that is not host:port, or an address that cannot be listened on (in use, not this machine's); an OTEL_* variable asking for an export objlease cannot make (OTLP over gRPC or JSON, an exporter other than otlp)"},
	{76, []error{objlease.ErrLeaseLost}, "run, hold, elect: the lease was lost while held"},
	{74, []error{errLocalInput}, "put, batch put: standard input could not be read, or not copied into a temporary file ($TMPDIR missing, read-only or full); nothing was written"},
	{77, []error{fence.ErrStale}, "put, rm, batch, run --commit: refused, a newer token has written the object or committed the prefix"},
	{65, []error{objlease.ErrBadRecord, objlease.ErrNewerSchema, objlease.ErrFencedObject, fence.ErrLeaseRecord, fence.ErrBadManifest, tick.ErrBadMark, objlease.ErrTokenExhausted, objlease.ErrTokenUnknown},
		"the object at the key is not an objlease record (or is of a newer schema), left alone unless --force is given; or it is a fenced data object, or a lease record where fenced data was meant, never overwritten; or a batch's manifest, or a tick's mark, is not objlease's; or its token is the largest there can be; or, with --force, nothing shows the highest token issued (give --min-token or --fenced)"},
	{75, []error{objlease.ErrHeld, errNotAcquired}, "the lease was not acquired: held by another holder past --timeout (release: held by another holder)"},
	{1, []error{errNoLease, providers.ErrNotFound, errUnsafe, bench.ErrViolation}, "inspect, release: there is no lease at the key; group: no group under the prefix; batch show: nothing has been committed under the prefix; doctor: the store does not enforce conditional writes; bench: two holders held a lease at once"},
	{126, []error{errCannotStart}, "run, elect, group join: the command could not be started"},
	{127, []error{errNotFound}, "run, elect, group join: the command was not found"},
	{69, []error{providers.ErrUnreachable}, "store unreachable (no connection could be made), or the store failed"},
}

// exitCodeOf maps the error a command returned to its exit code.
func exitCodeOf(err error) int {
	if err == nil {
		return 0
	}
	var st exitStatus
	if errors.As(err, &st) {
		return int(st)
	}
	var in interrupt
	if errors.As(err, &in) {
		return in.code()
	}
	for _, row := range exitCodes {
		for _, e := range row.errs {
			if errors.Is(err, e) {
				return row.code
			}
		}
	}
	return 69
}

// exitStatus is run's command's exit status, which run exits with.
type exitStatus int

func (s exitStatus) Error() string { return fmt.Sprintf("command exited %d", int(s)) }

// interrupt is the cause of a command ended by a signal.
type interrupt struct{ sig os.Signal }

func (i interrupt) Error() string { return "interrupted by " + i.sig.String() }

// code is the shell's exit status for death by the signal.
func (i interrupt) code() int {
	if s, ok := i.sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 128 + int(syscall.SIGINT)
}

// interrupted returns ctx's interrupt, if a signal ended it.
func interrupted(ctx context.Context) (interrupt, bool) {
	var i interrupt
	ok := errors.As(context.Cause(ctx), &i)
	return i, ok
}

// tagged is an error whose message is msg and which matches sentinel.
type tagged struct {
	msg      string
	sentinel error
}

func (t *tagged) Error() string { return t.msg }
func (t *tagged) Unwrap() error { return t.sentinel }

// noLease says there is no lease at key, and that the directory a file://
// URL names does not exist if it does not: a mistyped path reads as empty.
func noLease(key, rawURL string) error {
	return &tagged{fmt.Sprintf("no lease at %q", key) + missingDir(rawURL), errNoLease}
}

// missingDir is " (the directory D does not exist)" for a file:// URL
// whose directory D does not exist, and "" otherwise.
func missingDir(rawURL string) string {
	u, err := url.Parse(storeURL(rawURL))
	if err != nil || u.Scheme != "file" || !strings.HasPrefix(u.Path, "/") {
		return ""
	}
	dir := u.Path[:strings.LastIndexByte(u.Path, '/')+1]
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return fmt.Sprintf(" (the directory %s does not exist)", dir)
	}
	return ""
}

func usagef(format string, args ...any) error {
	return &tagged{fmt.Sprintf(format, args...), errUsage}
}

// saidError is err with what it means for the command said first ("the
// command exited 0, but its tick could not be marked done"); the reason
// that follows is err's, as short as any other.
type saidError struct {
	what string
	err  error
}

func (e *saidError) Error() string { return e.what + ": " + e.err.Error() }
func (e *saidError) Unwrap() error { return e.err }

// opError is a command's failure on one URL: "inspect URL: ...".
type opError struct {
	op  string
	url string
	err error
}

func (e *opError) Error() string { return e.op + " " + e.url + ": " + e.err.Error() }
func (e *opError) Unwrap() error { return e.err }

func opErr(op, url string, err error) error {
	if err == nil {
		return nil
	}
	return &opError{op, url, err}
}

// describe is err in one line a person can act on: what failed, on which
// URL, why, and what to check, without the SDK's request IDs and bodies.
func describe(err error) string {
	var oe *opError
	if errors.As(err, &oe) {
		// A plain path is judged as the file:// URL it stands for.
		return oneLine(oe.op + " " + oe.url + ": " + reason(oe.err, storeURL(oe.url)))
	}
	return oneLine(reason(err, ""))
}

// oneLine is line with its control characters (a newline in a key or a
// URL) escaped as Go writes them, and its long words elided: one line a
// terminal shows as one.
func oneLine(line string) string {
	if strings.ContainsFunc(line, unicode.IsControl) {
		var b strings.Builder
		for _, r := range line {
			if unicode.IsControl(r) {
				q := strconv.QuoteRune(r)
				b.WriteString(q[1 : len(q)-1])
				continue
			}
			b.WriteRune(r)
		}
		line = b.String()
	}
	return elide(line)
}

// longWord is the length past which a word of a line (a URL, a key, a
// path) is shown by its start and its end.
const longWord = 160

// elide shortens each word of line longer than longWord to its start and
// its end around the count of bytes left out, so that a 5,000-byte path
// still gives a line a person can read; -v's detail line has it whole.
func elide(line string) string {
	if len(line) <= 2*longWord {
		return line
	}
	words := strings.Split(line, " ")
	for i, w := range words {
		if len(w) <= longWord {
			continue
		}
		head, tail := w[:80], w[len(w)-40:]
		for !utf8.RuneStart(tail[0]) {
			tail = tail[1:]
		}
		head = strings.ToValidUTF8(head, "")
		words[i] = fmt.Sprintf("%s…(%d bytes)…%s", head, len(w)-len(head)-len(tail), tail)
	}
	return strings.Join(words, " ")
}

// reason is the short cause of err; rawURL, if known, names the bucket.
func reason(err error, rawURL string) string {
	held := heldBy(err)
	var oe *objlease.Error
	errors.As(err, &oe)
	var pe *providers.Error
	var ne *net.OpError
	var in interrupt
	var te *timeoutError
	var ste *storeTimeoutError
	var notHolder *notHolderError
	var timeout *providers.TimeoutError
	var said *saidError
	var unknown *unknownTake
	switch {
	case errors.As(err, &said):
		return said.what + ": " + reason(said.err, rawURL)
	case errors.As(err, &in):
		return in.Error()
	case errors.As(err, &unknown):
		return unknown.why(rawURL)
	case errors.As(err, &te):
		return te.cause.Error() + ": " + reason(te.held, rawURL)
	case errors.As(err, &ste):
		return ste.cause.Error() + "; the store was failing: " + reason(ste.err, rawURL)
	case errors.Is(err, objlease.ErrLeaseLost) && oe != nil && oe.Reason != "":
		return objlease.ErrLeaseLost.Error() + ": " + oe.Reason // what replaced the record
	case errors.As(err, &notHolder):
		return notHolder.Error()
	case held != nil:
		return fmt.Sprintf("held by %q (token %d); this observer could take it over in %v at the earliest, if its holder stops renewing",
			held.Record.Holder, held.Record.Token, roundDuration(held.Wait))
	case errors.Is(err, objlease.ErrTokenUnknown) && oe != nil:
		return fmt.Sprintf("the highest token issued at %q cannot be established: %s; give it with --min-token N (the highest token ever issued there; 0 if none ever was) or --fenced KEY (a fenced object written with the lease's tokens)", oe.Key, oe.Reason)
	case errors.Is(err, objlease.ErrFencedObject) && oe != nil:
		return fmt.Sprintf("the object at %q is a fenced data object, not a lease record; it is never overwritten", oe.Key)
	case errors.Is(err, fence.ErrBadManifest):
		return err.Error() + "; something other than a batch commit wrote it, and it is never overwritten: move it aside with the store's own tools, then commit again"
	case errors.Is(err, fence.ErrReservedKey):
		return err.Error() + "; use batch put and batch commit for a batch's objects"
	case errors.Is(err, fence.ErrLeaseRecord):
		return fmt.Sprintf("the object %s is a lease record, not fenced data; it is never overwritten (end the lease with release or break)", keyOf(err, rawURL))
	case (errors.Is(err, objlease.ErrBadRecord) || errors.Is(err, objlease.ErrNewerSchema)) && oe != nil:
		what := "is not an objlease record"
		if errors.Is(err, objlease.ErrNewerSchema) {
			what = "is an objlease record of a newer schema"
		}
		return fmt.Sprintf("the object at %q %s: %s; it is left alone unless --force is given", oe.Key, what, oe.Reason)
	case errors.Is(err, providers.ErrNoBucket) && noBucketHint(rawURL) != "":
		// The URL explains it, in its store's words.
		return noBucketHint(rawURL)
	case errors.Is(err, providers.ErrNoBucket):
		return fmt.Sprintf("%s %q does not exist (check the name%s)", hintsOf(rawURL).Container, bucketOf(rawURL), orHint(hintsOf(rawURL).Endpoint))
	case errors.Is(err, providers.ErrPermission) && (errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)) && errors.As(err, &pe):
		// Nothing was refused to anyone: the disk, or the user's quota, is full.
		what := "the file system is full"
		if errors.Is(err, syscall.EDQUOT) {
			what = "the disk quota is used up"
		}
		return what + ": " + strings.TrimPrefix(core(pe), providers.ErrPermission.Error()+": ") + " (free space on that file system, or use another directory)"
	case errors.Is(err, providers.ErrPermission) && strings.HasPrefix(rawURL, "file:") && errors.As(err, &pe):
		// The file system refused: the store's words name the file and why.
		return core(pe) + " (check that the directory is writable by this user and not mounted read-only)"
	case errors.Is(err, providers.ErrAccessDenied) && errors.As(err, &pe):
		return fmt.Sprintf("%s %q: access denied: the credentials were accepted, and lack the permission for this request (see docs/permissions.md)", pe.Op, pe.Key)
	case errors.Is(err, providers.ErrNoCredentials):
		return "no credentials found" + parenHint("set", hintsOf(rawURL).NoCredentials)
	case errors.Is(err, providers.ErrPermission):
		return "the store refused the credentials" + parenHint("check", hintsOf(rawURL).Credentials)
	case errors.Is(err, providers.ErrWrongEndpoint):
		msg := "the endpoint does not serve the store's API"
		if errors.As(err, &pe) {
			msg = core(pe)
		}
		return msg + " (check " + whereEndpoint(rawURL) + ")"
	case errors.As(err, &timeout):
		what := "store unreachable"
		if errors.Is(err, providers.ErrUnknownOutcome) {
			what = "outcome of a write unknown (it may have landed)"
		}
		return fmt.Sprintf("%s: %v (check %s the network; --request-timeout sets the wait)", what, timeout, whereEndpointAnd(rawURL))
	case errors.Is(err, providers.ErrUnreachable):
		why := "no connection could be made"
		if errors.As(err, &ne) {
			why = ne.Error()
		}
		return "store unreachable: " + why + " (check " + whereEndpointAnd(rawURL) + " the network)"
	case errors.As(err, &ne):
		return fmt.Sprintf("cannot reach the store: %v (check the endpoint and the network)", ne)
	case errors.Is(err, providers.ErrInvalidBucket) && errors.As(err, &pe) && bucketOf(rawURL) != "":
		msg := fmt.Sprintf("the store does not accept the %s name %q", hintsOf(rawURL).Container, bucketOf(rawURL))
		if parts, ok := pe.Err.(interface{ Unwrap() []error }); ok && len(parts.Unwrap()) > 1 {
			msg += ": " + parts.Unwrap()[1].Error() // the store's answer
		}
		return msg
	case errors.Is(err, providers.ErrInvalidKey) && errors.As(err, &pe):
		return fmt.Sprintf("the store does not accept the key %q: %s", pe.Key, strings.TrimPrefix(core(pe), providers.ErrInvalidKey.Error()+": "))
	}
	return shorten(err)
}

// heldBy returns err's *objlease.Error if err reports a held lease, else
// nil.
func heldBy(err error) (e *objlease.Error) {
	if errors.As(err, &e) && e.Err == objlease.ErrHeld {
		return e
	}
	return nil
}

// shorten is err's message with the store error in it, if any, cut down to
// its portable part.
func shorten(err error) string {
	msg := err.Error()
	var pe *providers.Error
	if !errors.As(err, &pe) {
		return msg
	}
	short := fmt.Sprintf("%s %q: %s", pe.Op, pe.Key, core(pe))
	if i := strings.Index(msg, pe.Error()); i >= 0 {
		return msg[:i] + short + msg[i+len(pe.Error()):]
	}
	return short
}

// core is a store error's portable part: the sentinel and what the store
// added to it, without the SDK's own message.
func core(pe *providers.Error) string {
	err := pe.Err
	for {
		// A message put on one line wraps the sentinel and the native error.
		single, ok := err.(interface{ Unwrap() error })
		if !ok || single.Unwrap() == nil {
			break
		}
		if _, joined := single.Unwrap().(interface{ Unwrap() []error }); !joined {
			break
		}
		err = single.Unwrap()
	}
	parts, ok := err.(interface{ Unwrap() []error })
	if !ok || len(parts.Unwrap()) < 2 {
		return pe.Err.Error()
	}
	msg := parts.Unwrap()[0].Error()
	if errors.Is(pe.Err, providers.ErrInvalidKey) && msg == providers.ErrInvalidKey.Error() {
		// The store's own words come first in the rest ("bucket "b" does not exist: ...").
		native, _, _ := strings.Cut(parts.Unwrap()[1].Error(), ": ")
		msg += ": " + native
	}
	return msg
}

// keyOf names the object a store error is about, or else the URL.
func keyOf(err error, rawURL string) string {
	var pe *providers.Error
	if errors.As(err, &pe) {
		return strconv.Quote(pe.Key)
	}
	return rawURL
}

func bucketOf(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return u.Host
}

// foreignObject is err, an *objlease.Error for the object at key that
// is not a lease record, told in plain words: what the object is (text,
// binary, JSON of another kind) rather than the JSON decoder's message. It
// matches objlease.ErrBadRecord still; hint ends the line. Any other error
// is returned as it is.
func foreignObject(ctx context.Context, store providers.Store, key string, err error, hint string) error {
	if !errors.Is(err, objlease.ErrBadRecord) {
		return err
	}
	obj, gerr := store.Get(ctx, key, objlease.MaxRecordSize)
	if gerr != nil {
		return err
	}
	what, damaged := describeObject(obj.Data)
	if what == "" {
		return err
	}
	if damaged {
		return &tagged{fmt.Sprintf("the object at %q is not a valid objlease lease record: %s%s", key, what, hint), objlease.ErrBadRecord}
	}
	return &tagged{fmt.Sprintf("the object at %q is not an objlease lease record: %s%s", key, what, hint), objlease.ErrBadRecord}
}

// plainReason says why data, an object that is not a valid lease record,
// is not one: in describeObject's words, or in the record's own reason
// where that says it better.
func plainReason(data []byte, re *objlease.Error) string {
	if what, _ := describeObject(data); what != "" {
		return what
	}
	return re.Reason
}

// describeObject says what b, which is not a valid lease record, is; damaged
// is set for a record with the schema field whose other fields are wrong.
// It returns "" where the record's own reason says it better (a field out
// of range in an otherwise well-formed record).
func describeObject(b []byte) (what string, damaged bool) {
	if len(b) == 0 {
		return "it is empty (0 bytes)", false
	}
	if !json.Valid(b) {
		if !utf8.Valid(b) || bytes.ContainsFunc(b, func(r rune) bool { return !unicode.IsPrint(r) && !unicode.IsSpace(r) }) {
			return fmt.Sprintf("%d bytes, binary", len(b)), false
		}
		trimmed := bytes.TrimLeftFunc(b, unicode.IsSpace)
		if len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
			return fmt.Sprintf("%d bytes, text that is not well-formed JSON", len(b)), false
		}
		first, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
		if r := []rune(first); len(r) > 40 {
			first = string(r[:40]) + "..."
		}
		return fmt.Sprintf("%d bytes, text, starts with %s", len(b), strconv.Quote(first)), false
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		var kind string
		switch bytes.TrimSpace(b)[0] {
		case '[':
			kind = "an array"
		case '"':
			kind = "a string"
		case 't', 'f':
			kind = "true or false"
		case 'n':
			kind = "null"
		default:
			kind = "a number"
		}
		return "JSON, " + kind + ", not an object", false
	}
	if _, ok := fields["objlease"]; !ok {
		names := make([]string, 0, len(fields))
		for k := range fields {
			names = append(names, strconv.Quote(k))
		}
		slices.Sort(names)
		if len(names) > 5 {
			names = append(names[:5], "...")
		}
		if len(names) == 0 {
			return "JSON without the fields of a lease record (an empty object)", false
		}
		return "JSON without the fields of a lease record (it has " + strings.Join(names, ", ") + ")", false
	}
	// The schema field is there: say which field is wrong.
	var r objlease.Record
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err := dec.Decode(&r)
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &te):
		return fmt.Sprintf("its field %q holds %s, not %s", te.Field, article(te.Value), typeWord(te.Type.Kind().String())), true
	case err != nil && strings.HasPrefix(err.Error(), "json: unknown field "):
		return "it has a field a lease record does not: " + strings.TrimPrefix(err.Error(), "json: unknown field "), true
	}
	return "", true
}

// article is a JSON value's kind as the decoder names it, with an article.
func article(v string) string {
	switch v {
	case "array", "object":
		return "an " + v
	case "string", "number", "bool":
		if v == "bool" {
			return "true or false"
		}
		return "a " + v
	}
	return v
}

// typeWord is a Go kind in the words of a record's reader.
func typeWord(kind string) string {
	switch {
	case strings.HasPrefix(kind, "uint"):
		return "a whole number"
	case strings.HasPrefix(kind, "int"), strings.HasPrefix(kind, "float"):
		return "a number"
	case kind == "string":
		return "a string"
	case kind == "bool":
		return "true or false"
	case kind == "slice":
		return "base64 text"
	case kind == "struct":
		return "a time (RFC 3339 text)"
	}
	return "the right type"
}
