package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// logFormatArg is --log-format as given, for the objlease processes this
// one starts (run's supervisor); "" for text.
var logFormatArg string

// lineHandler prints log records as "objlease: message: cause (k=v ...)",
// the one form every message takes. Causes are shortened like a failed
// command's; -v prints them whole.
type lineHandler struct {
	w       io.Writer
	level   *slog.LevelVar
	verbose *bool
	json    *bool   // --log-format json: one JSON object per line instead
	cmd     *string // the command's name, for json
	mu      *sync.Mutex
	// attrs are the attributes added by WithAttrs, each with the groups
	// open when it was added; groups are the groups open now (WithGroup).
	attrs  []groupedAttr
	groups []string
}

// groupedAttr is an attribute given to WithAttrs and the groups it goes in.
type groupedAttr struct {
	groups []string
	attr   slog.Attr
}

func (h *lineHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

// reportedByCommand are library messages the commands report themselves,
// with what they did about it; shown only under -v.
var reportedByCommand = map[string]bool{"lease lost": true}

func (h *lineHandler) Handle(_ context.Context, r slog.Record) error {
	if !*h.verbose && reportedByCommand[r.Message] {
		return nil
	}
	if h.json != nil && *h.json {
		return h.handleJSON(r)
	}
	var b strings.Builder
	b.WriteString("objlease: ")
	if r.Level >= slog.LevelWarn && r.Level < slog.LevelError {
		b.WriteString("warning: ")
	}
	b.WriteString(r.Message)
	var extra []string
	add := func(key string, v slog.Value) {
		if err, ok := v.Any().(error); ok && v.Kind() == slog.KindAny {
			msg := reason(err, "")
			if *h.verbose {
				msg = err.Error()
			}
			if key == "err" {
				b.WriteString(": " + msg)
			} else {
				extra = append(extra, key+"="+quoteIfNeeded(msg))
			}
			return
		}
		extra = append(extra, key+"="+quoteIfNeeded(v.String()))
	}
	if *h.verbose {
		for _, ga := range h.attrs {
			flatten(ga.groups, ga.attr, add)
		}
	}
	r.Attrs(func(a slog.Attr) bool {
		flatten(h.groups, a, add)
		return true
	})
	if len(extra) > 0 {
		b.WriteString(" (" + strings.Join(extra, " ") + ")")
	}
	b.WriteString("\n")
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, b.String())
	return err
}

// flatten calls f with each attribute a holds, its key prefixed with the
// groups it is in, dotted ("g.k"): a itself, or each attribute of a group,
// recursively. Empty attributes and empty groups are left out.
func flatten(groups []string, a slog.Attr, f func(key string, v slog.Value)) {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		if a.Key != "" {
			groups = append(slices.Clip(groups), a.Key)
		}
		for _, ga := range v.Group() {
			flatten(groups, ga, f)
		}
		return
	}
	if a.Key == "" && v.Any() == nil {
		return
	}
	f(strings.Join(append(slices.Clip(groups), a.Key), "."), v)
}

// handleJSON writes r as one JSON object: time (the record's), level, msg
// and cmd, then its attributes, groups as nested objects, errors as
// strings (shortened as in text, whole under -v).
func (h *lineHandler) handleJSON(r slog.Record) error {
	body := new(jsonObject)
	for _, ga := range h.attrs {
		h.addJSON(body, ga.groups, ga.attr)
	}
	r.Attrs(func(a slog.Attr) bool {
		h.addJSON(body, h.groups, a)
		return true
	})
	cmd := ""
	if h.cmd != nil {
		cmd = *h.cmd
	}
	line := jsonRecord(r.Time, r.Level, r.Message, cmd, body)
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := h.w.Write(line)
	return err
}

// addJSON adds a to o inside groups: a group as an object (inline if its
// key is empty), left out, as an empty attribute is, if it holds nothing.
func (h *lineHandler) addJSON(o *jsonObject, groups []string, a slog.Attr) {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		if a.Key != "" {
			groups = append(slices.Clip(groups), a.Key)
		}
		for _, ga := range v.Group() {
			h.addJSON(o, groups, ga)
		}
		return
	}
	if a.Key == "" && v.Any() == nil {
		return
	}
	for _, g := range groups {
		o = o.child(g)
	}
	o.set(a.Key, h.jsonValue(v))
}

// jsonValue is v as --log-format json writes it.
func (h *lineHandler) jsonValue(v slog.Value) any {
	switch v.Kind() {
	case slog.KindString:
		return v.String()
	case slog.KindInt64:
		return v.Int64()
	case slog.KindUint64:
		return v.Uint64()
	case slog.KindFloat64:
		return v.Float64()
	case slog.KindBool:
		return v.Bool()
	case slog.KindTime:
		return v.Time().UTC().Format(time.RFC3339Nano)
	}
	if err, ok := v.Any().(error); ok {
		if *h.verbose {
			return err.Error()
		}
		return reason(err, "")
	}
	return v.String()
}

// jsonField is one key of a --log-format json line.
type jsonField struct {
	key   string
	value any
}

// jsonObject is a JSON object that keeps its keys in the order they were
// first set. The first value set for a key stays, except that two groups
// (objects) of the same key merge.
type jsonObject struct {
	keys []string
	vals map[string]any
}

func (o *jsonObject) set(key string, v any) {
	if o.vals == nil {
		o.vals = map[string]any{}
	}
	old, ok := o.vals[key]
	if !ok {
		o.keys = append(o.keys, key)
		o.vals[key] = v
		return
	}
	if a, ok := old.(*jsonObject); ok {
		if b, ok := v.(*jsonObject); ok {
			for _, k := range b.keys {
				a.set(k, b.vals[k])
			}
		}
	}
}

// child returns the object at key, added if missing; a key that holds
// something else keeps it, and what goes in the returned object is lost.
func (o *jsonObject) child(key string) *jsonObject {
	if c, ok := o.vals[key].(*jsonObject); ok {
		return c
	}
	c := new(jsonObject)
	o.set(key, c)
	return c
}

func (o *jsonObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, key := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(key)
		v, err := json.Marshal(o.vals[key])
		if err != nil {
			v, _ = json.Marshal(fmt.Sprint(o.vals[key]))
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// jsonLine is one --log-format json line stamped now: {"time","level",
// "msg","cmd", then fields in order}, a field whose key came before left
// out.
func jsonLine(level slog.Level, msg, cmd string, fields []jsonField) []byte {
	body := new(jsonObject)
	for _, f := range fields {
		body.set(f.key, f.value)
	}
	return jsonRecord(time.Now(), level, msg, cmd, body)
}

// jsonRecord is one --log-format json line: {"time" (left out if t is
// zero),"level","msg","cmd", then body's keys}, a key of body that came
// before left out.
func jsonRecord(t time.Time, level slog.Level, msg, cmd string, body *jsonObject) []byte {
	o := new(jsonObject)
	if !t.IsZero() {
		o.set("time", t.UTC().Format(time.RFC3339Nano))
	}
	o.set("level", level.String())
	o.set("msg", msg)
	o.set("cmd", cmd)
	for _, k := range body.keys {
		if _, ok := o.vals[k]; !ok {
			o.set(k, body.vals[k])
		}
	}
	b, _ := o.MarshalJSON()
	return append(b, '\n')
}

func (h *lineHandler) WithAttrs(as []slog.Attr) slog.Handler {
	if len(as) == 0 {
		return h
	}
	n := *h
	n.attrs = slices.Clip(h.attrs)
	for _, a := range as {
		n.attrs = append(n.attrs, groupedAttr{groups: h.groups, attr: a})
	}
	return &n
}

func (h *lineHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	n := *h
	n.groups = append(slices.Clip(h.groups), name)
	return &n
}

func quoteIfNeeded(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\n\"=") {
		return fmt.Sprintf("%q", s)
	}
	return s
}
