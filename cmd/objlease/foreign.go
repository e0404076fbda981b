package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/providers"
)

// foreignObject is err, a *objlease.RecordError for the object at key that
// is not a lease record, told in plain words: what the object is (text,
// binary, JSON of another kind) rather than the JSON decoder's message. It
// matches objlease.ErrBadRecord still; hint ends the line. Any other error
// is returned as it is.
func foreignObject(ctx context.Context, store providers.Store, key string, err error, hint string) error {
	var rec *objlease.RecordError
	if !errors.As(err, &rec) || !errors.Is(err, objlease.ErrBadRecord) {
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
func plainReason(data []byte, re *objlease.RecordError) string {
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
