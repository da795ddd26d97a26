package lgcodec

// DecodeKeys is Decode for a value that is a map, keeping only the entries
// whose keys are in keep. In msgpack the other entries are stepped over
// without being built, so reading one key of a state holding megabytes of
// geometry costs a scan of those bytes, not their decoding. A nil keep keeps
// every entry, as Decode does. A value that is not a map is decoded whole,
// for the caller to reject or accept.
func DecodeKeys(blobType string, data []byte, keep map[string]bool, lim Limits) (v any, ok bool, err error) {
	if keep == nil || blobType != typeMsgpack {
		v, ok, err = Decode(blobType, data, lim)
		if err != nil || !ok || keep == nil {
			return v, ok, err
		}
		m, isMap := v.(map[string]any)
		if !isMap {
			return v, ok, nil
		}
		for k := range m {
			if !keep[k] {
				delete(m, k)
			}
		}
		return m, true, nil
	}
	lim = lim.withDefaults()
	if err := checkDecodable(blobType, data, lim); err != nil {
		return nil, false, err
	}
	d := newMsgpackDecoder(data, lim)
	d.started()
	t, err := d.readToken()
	if err != nil {
		return nil, false, err
	}
	if t.kind != mpMap {
		// Not a map: decode it whole from the start.
		v, err := decodeMsgpack(data, lim)
		return v, err == nil, err
	}
	if 1 > d.maxDepth {
		return nil, false, depthError(d.maxDepth, 1, t.off)
	}
	out := make(map[string]any, min(len(keep), t.n))
	for range t.n {
		keyAt := d.pos
		k, err := d.decodeValue(1)
		if err != nil {
			return nil, false, err
		}
		key, err := d.keys.text(k, keyAt)
		if err != nil {
			return nil, false, err
		}
		if !keep[key] {
			if err := d.skipValues(1, 1); err != nil {
				return nil, false, err
			}
			continue
		}
		v, err := d.decodeValue(1)
		if err != nil {
			return nil, false, err
		}
		out[key] = v
	}
	if d.pos != d.end {
		return nil, false, d.malformed(d.pos, "%d trailing bytes after the value", d.end-d.pos)
	}
	return out, true, nil
}
