package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
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
	attrs   []slog.Attr
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
	add := func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok {
			msg := reason(err, "")
			if *h.verbose {
				msg = err.Error()
			}
			if a.Key == "err" {
				b.WriteString(": " + msg)
			} else {
				extra = append(extra, a.Key+"="+quoteIfNeeded(msg))
			}
			return true
		}
		extra = append(extra, a.Key+"="+quoteIfNeeded(a.Value.String()))
		return true
	}
	for _, a := range h.attrs {
		if *h.verbose {
			add(a)
		}
	}
	r.Attrs(add)
	if len(extra) > 0 {
		b.WriteString(" (" + strings.Join(extra, " ") + ")")
	}
	b.WriteString("\n")
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, b.String())
	return err
}

// handleJSON writes r as one JSON object: time, level, msg and cmd, then
// its attributes, errors as strings (shortened as in text, whole under -v).
func (h *lineHandler) handleJSON(r slog.Record) error {
	var fields []jsonField
	add := func(a slog.Attr) bool {
		v := a.Value.Resolve()
		switch v.Kind() {
		case slog.KindString:
			fields = append(fields, jsonField{a.Key, v.String()})
		case slog.KindInt64:
			fields = append(fields, jsonField{a.Key, v.Int64()})
		case slog.KindUint64:
			fields = append(fields, jsonField{a.Key, v.Uint64()})
		case slog.KindFloat64:
			fields = append(fields, jsonField{a.Key, v.Float64()})
		case slog.KindBool:
			fields = append(fields, jsonField{a.Key, v.Bool()})
		case slog.KindTime:
			fields = append(fields, jsonField{a.Key, v.Time().UTC().Format(time.RFC3339Nano)})
		default:
			if err, ok := v.Any().(error); ok {
				msg := reason(err, "")
				if *h.verbose {
					msg = err.Error()
				}
				fields = append(fields, jsonField{a.Key, msg})
			} else {
				fields = append(fields, jsonField{a.Key, v.String()})
			}
		}
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	cmd := ""
	if h.cmd != nil {
		cmd = *h.cmd
	}
	line := jsonLine(r.Level, r.Message, cmd, fields)
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := h.w.Write(line)
	return err
}

// jsonField is one key of a --log-format json line.
type jsonField struct {
	key   string
	value any
}

// jsonLine is one --log-format json line: {"time","level","msg","cmd",
// then fields in order}, a field whose key came before left out.
func jsonLine(level slog.Level, msg, cmd string, fields []jsonField) []byte {
	all := append([]jsonField{
		{"time", time.Now().UTC().Format(time.RFC3339Nano)},
		{"level", level.String()},
		{"msg", msg},
		{"cmd", cmd},
	}, fields...)
	seen := make(map[string]bool, len(all))
	var b bytes.Buffer
	b.WriteByte('{')
	for _, f := range all {
		if seen[f.key] {
			continue
		}
		seen[f.key] = true
		k, _ := json.Marshal(f.key)
		v, err := json.Marshal(f.value)
		if err != nil {
			v, _ = json.Marshal(fmt.Sprint(f.value))
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteString("}\n")
	return b.Bytes()
}

func (h *lineHandler) WithAttrs(as []slog.Attr) slog.Handler {
	n := *h
	n.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return &n
}

func (h *lineHandler) WithGroup(string) slog.Handler { return h }

func quoteIfNeeded(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\n\"=") {
		return fmt.Sprintf("%q", s)
	}
	return s
}
