package main

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/objlease/objlease/objlease"
)

// humanAge prints an age as kubectl does: 45s, 2m, 3h20m, 5d. A negative
// age (a store whose Last-Modified has one-second resolution is ahead of
// its Date by up to a second) prints as 0s.
func humanAge(d time.Duration) string {
	if d < time.Second {
		return "0s"
	}
	s := int64(d / time.Second)
	m, h := s/60, s/3600
	switch {
	case s < 120:
		return fmt.Sprintf("%ds", s)
	case m < 10:
		return twoUnits(m, "m", s%60, "s")
	case m < 180:
		return fmt.Sprintf("%dm", m)
	case h < 8:
		return twoUnits(h, "h", m%60, "m")
	case h < 48:
		return fmt.Sprintf("%dh", h)
	case h < 24*8:
		return twoUnits(h/24, "d", h%24, "h")
	case h < 24*365*2:
		return fmt.Sprintf("%dd", h/24)
	}
	return fmt.Sprintf("%dy%dd", h/(24*365), (h/24)%365)
}

// twoUnits prints n of unit and then rest of the next smaller one, as
// 3h20m, leaving out a rest of zero.
func twoUnits(n int64, unit string, rest int64, restUnit string) string {
	if rest == 0 {
		return fmt.Sprintf("%d%s", n, unit)
	}
	return fmt.Sprintf("%d%s%d%s", n, unit, rest, restUnit)
}

// roundDuration is a wait to print: tenths of a second below a minute,
// else as humanAge.
func roundDuration(d time.Duration) string {
	if d < time.Minute {
		return max(d, 0).Round(100 * time.Millisecond).String()
	}
	return humanAge(d)
}

// stamp is a time to print: seconds, UTC.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func (c *cli) printJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.stdout, "%s\n", b)
	return err
}

// showHolder is a record's holder to print in a row: "-" if none, quoted
// as a Go string if it is not one objlease accepts (a record written by
// another writer may hold a newline or a control character, which would
// split or forge a row).
func showHolder(h string) string {
	if h != "" && objlease.CheckHolder(h) != nil {
		return strconv.Quote(h)
	}
	return orDash(h)
}

// showData is the data a holder stored in its record, to print in a row:
// "-" if none, else quoted as a Go string, cut at 40 bytes.
func showData(b []byte) string {
	if len(b) == 0 {
		return "-"
	}
	if len(b) > 40 {
		return strconv.Quote(string(b[:40])) + "..."
	}
	return strconv.Quote(string(b))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// listFormat is how a list-like command (list, group) prints: a table,
// optionally wide and without its header line, or one JSON document.
type listFormat struct {
	json      bool // -o json: one {"kind":"<Kind>List","items":[...]} document
	wide      bool // -o wide: the table with more columns
	noHeaders bool // --no-headers: the table without its header line
}

// addListOutput registers -o (json, wide, or text when not given) and
// --no-headers, for commands that print a table of many things.
func addListOutput(fs *flagSet) *listFormat {
	lf := new(listFormat)
	fs.Func("o", "output `format`: json (one document with every row) or wide (more columns); a table when not given", func(s string) error {
		switch s {
		case "text":
			*lf = listFormat{noHeaders: lf.noHeaders}
		case "json":
			lf.json, lf.wide = true, false
		case "wide":
			lf.json, lf.wide = false, true
		default:
			return fmt.Errorf("want json or wide")
		}
		return nil
	})
	fs.BoolVar(&lf.noHeaders, "no-headers", false, "print the table without its header line")
	return lf
}

// header prints a table's header line unless --no-headers: cols, and
// with -o wide wide after them.
func (lf *listFormat) header(w io.Writer, cols []string, wide ...string) {
	if lf.noHeaders {
		return
	}
	if lf.wide {
		cols = append(cols[:len(cols):len(cols)], wide...)
	}
	fmt.Fprintln(w, strings.Join(cols, "\t"))
}

// printList prints items, a slice, as one JSON document
// {"kind":kind,"items":[...]}, as kubectl prints a list: kind is the
// list's kind, e.g. "LeaseList". No items is an empty array, never null.
func (c *cli) printList(kind string, items any) error {
	if v := reflect.ValueOf(items); !v.IsValid() || (v.Kind() == reflect.Slice && v.Len() == 0) {
		items = []struct{}{}
	}
	return c.printJSON(struct {
		Kind  string `json:"kind"`
		Items any    `json:"items"`
	}{kind, items})
}

// shellQuote is s as one word of a shell command line: as it is if it
// has nothing a shell reads, else in single quotes.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:@%+=,-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
