package codec

import (
	"github.com/historyd/historyd/langgraph/codec/internal/mptoken"
	"github.com/historyd/historyd/langgraph/format"
)

// EachKey decodes a value that is a map one entry at a time, calling fn with
// each entry whose key is in keep (every entry when keep is nil) and
// dropping the entry before decoding the next. Only one entry's decoded
// data is alive at a time, so a caller that re-encodes each entry as it
// comes never holds the whole value decoded. In msgpack the entries not
// kept are stepped over without being built, so reading one key of a state
// holding megabytes of geometry costs a scan of those bytes, not their
// decoding. Entries come in stored order; JSON has no lengths to skip by,
// so a "json" value is decoded whole first.
//
// ok is false when the type is format.TypeEmpty. A value that is not a map is
// decoded whole and returned as whole without calling fn, for the caller
// to reject or accept. An error from fn ends the walk and is returned.
func EachKey(blobType string, data []byte, keep map[string]bool, lim Limits, fn func(key string, v any) error) (whole any, ok bool, err error) {
	if blobType != format.TypeMsgpack {
		v, ok, err := Decode(blobType, data, lim)
		if err != nil || !ok {
			return nil, ok, err
		}
		m, isMap := v.(map[string]any)
		if !isMap {
			return v, true, nil
		}
		for k, e := range m {
			if keep != nil && !keep[k] {
				continue
			}
			if err := fn(k, e); err != nil {
				return nil, true, err
			}
		}
		return nil, true, nil
	}
	lim = lim.withDefaults()
	return eachMsgpackKey(data, keep, lim, func(d *mpDecoder) (any, error) { return d.decodeValue(1) }, fn)
}

// eachMsgpackKey walks a msgpack map, reading each kept entry's value with
// entry and handing it to fn.
func eachMsgpackKey(data []byte, keep map[string]bool, lim Limits, entry func(*mpDecoder) (any, error), fn func(string, any) error) (whole any, ok bool, err error) {
	if err := checkDecodable(format.TypeMsgpack, data, lim); err != nil {
		return nil, false, err
	}
	data = snapshotPayload(data)
	d := newMsgpackDecoder(data, lim)
	d.Started()
	t, err := d.ReadToken()
	if err != nil {
		return nil, false, err
	}
	if t.Kind != mptoken.Map {
		// Not a map: decode it whole from the start.
		v, err := decodeMsgpack(data, lim)
		if err != nil {
			return nil, false, err
		}
		return v, true, nil
	}
	if 1 > d.maxDepth {
		return nil, false, depthError(d.maxDepth, 1, t.Off)
	}
	for range t.N {
		keyAt := d.Pos
		k, err := d.decodeValue(1)
		if err != nil {
			return nil, false, err
		}
		key, err := d.keys.text(k, keyAt)
		if err != nil {
			return nil, false, err
		}
		if keep != nil && !keep[key] {
			if err := d.skipValues(1, 1); err != nil {
				return nil, false, err
			}
			continue
		}
		v, err := entry(d)
		if err != nil {
			return nil, false, err
		}
		if err := fn(key, v); err != nil {
			return nil, true, err
		}
	}
	if d.Pos != d.End {
		return nil, false, d.Malformed(d.Pos, "%d trailing bytes after the value", d.End-d.Pos)
	}
	return nil, true, nil
}
