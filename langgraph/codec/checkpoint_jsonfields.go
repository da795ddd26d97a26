package codec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/historyd/historyd/langgraph/format"
)

// The JSON a checkpoint listing reads (PostgreSQL's checkpoint and metadata
// columns, JSON SqliteSaver rows) is walked token by token: a field
// historyd needs is read, every other one stepped over unread. A cold read
// parses one such row per checkpoint (thousands for a long thread), and
// decoding them into Go maps by reflection was most of the listing's
// allocations.

// fieldDecoders reuse decoders (and their state stacks) across rows.
var fieldDecoders = sync.Pool{New: func() any { return new(jsontext.Decoder) }}

// fieldOptions read JSON as encoding/json and Python's json do: a
// repeated name is allowed, the last one counting, and invalid UTF-8 in a
// string is kept (as U+FFFD).
var fieldOptions = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// eachJSONField walks the JSON object in data, what naming it in errors,
// calling fn with each member's name; fn reads the member's value from d
// or returns skip to step over it. JSON null for the whole of data is an
// object without members.
func eachJSONField(data []byte, what string, fn func(d *jsontext.Decoder, name string) (skip bool, err error)) error {
	return withJSONDecoder(data, func(d *jsontext.Decoder) error {
		if err := eachField(d, what, fn); err != nil {
			return err
		}
		return fieldsEnd(d, what)
	})
}

// withJSONDecoder runs fn with a pooled decoder reading data.
func withJSONDecoder(data []byte, fn func(d *jsontext.Decoder) error) error {
	d := fieldDecoders.Get().(*jsontext.Decoder)
	// bytes.Buffer: the decoder parses data in place, without a copy.
	d.Reset(bytes.NewBuffer(data), fieldOptions...)
	defer func() {
		d.Reset(noInput{}) // drops data before the decoder is pooled
		fieldDecoders.Put(d)
	}()
	return fn(d)
}

// noInput is what a pooled decoder holds: nothing, and no state to share.
type noInput struct{}

func (noInput) Read([]byte) (int, error) { return 0, io.EOF }

// eachField is eachJSONField for the object (or null) d reads next, which
// may be nested in another.
func eachField(d *jsontext.Decoder, what string, fn func(d *jsontext.Decoder, name string) (skip bool, err error)) error {
	switch k := d.PeekKind(); k {
	case 'n':
		if _, err := d.ReadToken(); err != nil {
			return fieldsMalformed(what, err)
		}
		return nil
	case '{':
	default:
		if k == 0 {
			_, err := d.ReadToken()
			return fieldsMalformed(what, err)
		}
		return &MalformedError{Format: format.TypeJSON, Offset: int(d.InputOffset()), Reason: fmt.Sprintf("%s is %s, not an object", what, kindName(k))}
	}
	if _, err := d.ReadToken(); err != nil {
		return fieldsMalformed(what, err)
	}
	for d.PeekKind() != '}' {
		tok, err := d.ReadToken()
		if err != nil {
			return fieldsMalformed(what, err)
		}
		skip, err := fn(d, tok.String())
		if err != nil {
			return err
		}
		if skip {
			if err := d.SkipValue(); err != nil {
				return fieldsMalformed(what, err)
			}
		}
	}
	if _, err := d.ReadToken(); err != nil {
		return fieldsMalformed(what, err)
	}
	return nil
}

// fieldsEnd checks that nothing but space follows the object.
func fieldsEnd(d *jsontext.Decoder, what string) error {
	if _, err := d.ReadToken(); !errors.Is(err, io.EOF) {
		if err == nil {
			return &MalformedError{Format: format.TypeJSON, Offset: int(d.InputOffset()), Reason: what + ": unexpected data after the object"}
		}
		return fieldsMalformed(what, err)
	}
	return nil
}

// fieldsMalformed turns a tokenizer error into the error the layers above
// map to data loss, keeping the offset where it is known.
func fieldsMalformed(what string, err error) error {
	off := -1
	var syn *jsontext.SyntacticError
	if errors.As(err, &syn) {
		off = int(syn.ByteOffset)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return &MalformedError{Format: format.TypeJSON, Offset: off, Reason: what + ": " + err.Error()}
}

// kindName names a JSON kind in an error.
func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 'f', 't':
		return "a boolean"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case '[':
		return "an array"
	case '{':
		return "an object"
	}
	return "not JSON"
}

// readJSONValue reads the next value from d and decodes it by the codec's
// JSON rules (numbers as int64 when they are integers, as Decode gives
// them), what naming it in errors.
func readJSONValue(d *jsontext.Decoder, what string) (any, error) {
	raw, err := d.ReadValue()
	if err != nil {
		return nil, fieldsMalformed(what, err)
	}
	v, err := decodeJSON(raw, Limits{}.withDefaults())
	if err != nil {
		return nil, &MalformedError{Format: format.TypeJSON, Offset: -1, Reason: fmt.Sprintf("%s: %v", what, err)}
	}
	return v, nil
}

// readJSONVersions reads a channel_versions object from d: each channel
// keep accepts, through NormalizeVersion, into out (the last of a repeated
// channel counting).
func readJSONVersions(d *jsontext.Decoder, keep func(string) bool, out map[string]string) error {
	return eachField(d, "channel_versions", func(d *jsontext.Decoder, ch string) (bool, error) {
		if !keep(ch) {
			return true, nil
		}
		v, err := readJSONValue(d, fmt.Sprintf("channel_versions[%q]", ch))
		if err != nil {
			return false, err
		}
		version, ok, err := NormalizeVersion(v)
		if err != nil {
			return false, &MalformedError{Format: format.TypeJSON, Offset: -1, Reason: fmt.Sprintf("channel_versions[%q]: %v", ch, err)}
		}
		if ok {
			out[ch] = version
		} else {
			delete(out, ch)
		}
		return false, nil
	})
}

// readJSONStrings reads an array of strings from d; ok is false (and the
// value consumed) when it is anything else.
func readJSONStrings(d *jsontext.Decoder, what string) (out []string, ok bool, err error) {
	if d.PeekKind() != '[' {
		if err := d.SkipValue(); err != nil {
			return nil, false, fieldsMalformed(what, err)
		}
		return nil, false, nil
	}
	if _, err := d.ReadToken(); err != nil {
		return nil, false, fieldsMalformed(what, err)
	}
	out, ok = []string{}, true
	for d.PeekKind() != ']' {
		if d.PeekKind() != '"' {
			ok = false
			if err := d.SkipValue(); err != nil {
				return nil, false, fieldsMalformed(what, err)
			}
			continue
		}
		tok, err := d.ReadToken()
		if err != nil {
			return nil, false, fieldsMalformed(what, err)
		}
		out = append(out, tok.String())
	}
	if _, err := d.ReadToken(); err != nil {
		return nil, false, fieldsMalformed(what, err)
	}
	if !ok {
		return nil, false, nil
	}
	return out, true, nil
}
