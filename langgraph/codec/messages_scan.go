package codec

import (
	"bytes"
	"encoding/base64"
	"errors"

	"github.com/historyd/historyd/langgraph/format"
)

// scanMsgpackMessages walks a msgpack messages list, decoding only each
// message's type and, for human messages, its content. A long thread's
// list is mostly AI and tool messages with large payloads, and turn
// derivation reads it at every checkpoint, so skipping them is what keeps
// listing turns cheap.
func scanMsgpackMessages(data []byte, lim Limits, mode ReadMode, known func(string) bool) (Messages, error) {
	d := newMsgpackDecoder(snapshotPayload(data), lim)
	d.mode, d.known = mode, known
	var out Messages
	if err := d.scanList(0, &out); err != nil {
		return Messages{}, err
	}
	if d.pos != d.end {
		return Messages{}, d.malformed(d.pos, "%d trailing bytes after the value", d.end-d.pos)
	}
	return out, nil
}

// scanList reads the messages list, looking through extension wrappers the
// way decodeExt does so both agree on what the list is.
func (d *mpDecoder) scanList(depth int, out *Messages) error {
	d.started()
	t, err := d.readToken()
	if err != nil {
		return err
	}
	switch t.kind {
	case mpArray:
		if depth+1 > d.maxDepth {
			return depthError(d.maxDepth, depth+1, t.off)
		}
		out.Count = t.n
		for range t.n {
			m, err := d.scanMessage(depth + 1)
			if err != nil {
				return err
			}
			out.add(m, d.mode)
		}
		return nil
	case mpExt:
		if t.code == extNumpyArray {
			v, err := d.decodeExt(t, depth)
			if err != nil {
				return err
			}
			*out, err = messagesFromValue(format.TypeMsgpack, v, d.mode)
			var me *MalformedError
			if errors.As(err, &me) {
				me.Offset = t.off
			}
			return err
		}
		return d.scanTuple(t, depth, func(depth int) error { return d.scanList(depth, out) },
			func() error {
				return d.malformed(t.off, "messages value is a secret, not a list")
			})
	}
	return d.malformed(t.off, "messages value is %s, not a list", tokenKind(t))
}

// scanTuple opens an extension payload and hands its data item to inner.
// secret runs instead when the extension is a pydantic secret.
func (d *mpDecoder) scanTuple(t mpToken, depth int, inner func(depth int) error, secret func() error) error {
	if t.code < extConstructorSingleArg || t.code > extPydanticV2 {
		return d.unsupportedExt(t)
	}
	savedEnd, savedPending, err := d.enterExt(t)
	if err != nil {
		return err
	}
	d.started()
	h, err := d.readToken()
	if err != nil {
		return err
	}
	if h.kind != mpArray || h.n < 3 {
		return d.malformed(t.off, "ext %d payload is not a (module, class, data, ...) tuple", t.code)
	}
	if depth+1 > d.maxDepth {
		return depthError(d.maxDepth, depth+1, h.off)
	}
	module, err := d.scanName(depth + 1)
	if err != nil {
		return err
	}
	class, err := d.scanName(depth + 1)
	if err != nil {
		return err
	}
	if t.code == extConstructorSingleArg && isSecretName(module, class) {
		if err := d.skipValues(1, depth+1); err != nil {
			return err
		}
		if err := secret(); err != nil {
			return err
		}
	} else if err := inner(depth + 1); err != nil {
		return err
	}
	if err := d.skipValues(h.n-3, depth+1); err != nil {
		return err
	}
	return d.leaveExt(t, savedEnd, savedPending)
}

// scanName reads the module or class name of an extension payload, without
// allocating when it is a plain string. An extension is decoded, since it
// may decode to a string as Decode would see it; other values are skipped,
// as they can never name a pydantic secret class.
func (d *mpDecoder) scanName(depth int) ([]byte, error) {
	start := d.pos
	pending := d.pending
	d.started()
	t, err := d.readToken()
	if err != nil {
		return nil, err
	}
	switch t.kind {
	case mpStr:
		return d.buf[t.start : t.start+t.n], nil
	case mpArray, mpMap:
		d.pos, d.pending = start, pending
		return nil, d.skipValues(1, depth)
	case mpExt:
		d.pos, d.pending = start, pending
		v, err := d.decodeValue(depth)
		if s, ok := v.(string); ok {
			return []byte(s), err
		}
		return nil, err
	}
	return nil, nil
}

// scanMessage reads one list element at slot depth as a Message; an
// element that is no message has no type.
func (d *mpDecoder) scanMessage(depth int) (Message, error) {
	d.started()
	t, err := d.readToken()
	if err != nil {
		return Message{}, err
	}
	switch t.kind {
	case mpMap:
		return d.scanMessageMap(t, depth)
	case mpArray:
		if depth+1 > d.maxDepth {
			return Message{}, depthError(d.maxDepth, depth+1, t.off)
		}
		return Message{}, d.skipValues(t.n, depth+1)
	case mpExt:
		if t.code == extNumpyArray {
			// Its payload was stepped over with the token; an array is
			// never a message.
			return Message{}, nil
		}
		if d.mode != All {
			if typ, ok := d.knownClass(t); ok {
				// A LangChain message class that is never a question: its
				// payload (tool calls, metadata, content) is stepped over
				// by the extension's length, unread.
				d.pos = t.start + t.n
				return Message{Type: typ}, nil
			}
		}
		var m Message
		err = d.scanTuple(t, depth, func(depth int) error {
			m, err = d.scanMessage(depth)
			return err
		}, func() error { return nil })
		return m, err
	}
	return Message{}, nil
}

// fixedType returns the type of a LangChain message class whose type is
// fixed by the class (a pydantic Literal field) and is never "human", by
// the module and class names LangGraph's serializer writes into ext 5
// payloads.
func fixedType(module, class []byte) (string, bool) {
	var want string
	switch string(module) {
	case "langchain_core.messages.ai":
		want = "ai"
	case "langchain_core.messages.tool":
		want = "tool"
	case "langchain_core.messages.system":
		want = "system"
	case "langchain_core.messages.function":
		want = "function"
	default:
		return "", false
	}
	switch string(class) {
	case "AIMessage", "ToolMessage", "SystemMessage", "FunctionMessage":
		return want, true
	case "AIMessageChunk", "ToolMessageChunk", "SystemMessageChunk", "FunctionMessageChunk":
		// A chunk's type is its class name.
		return string(class), true
	}
	return "", false
}

// knownClass reads the module and class an ext 5 payload names and returns
// the message type when fixedType knows the class. It leaves the decoder
// where it was.
func (d *mpDecoder) knownClass(t mpToken) (string, bool) {
	if t.code != extPydanticV2 {
		return "", false
	}
	pos, end, pending := d.pos, d.end, d.pending
	defer func() { d.pos, d.end, d.pending = pos, end, pending }()
	d.pos, d.end, d.pending = t.start, t.start+t.n, 0
	h, err := d.readToken()
	if err != nil || h.kind != mpArray || h.n < 3 {
		return "", false
	}
	var names [2][]byte
	for i := range names {
		n, err := d.readToken()
		if err != nil || n.kind != mpStr {
			return "", false
		}
		names[i] = d.buf[n.start : n.start+n.n]
	}
	return fixedType(names[0], names[1])
}

// scanMessageMap reads a message's field map, whose header t has been
// read. Keys are compared in their decoded form, as Decode would key them.
// The fields a mode needs are stepped over when met and decoded after the
// map, once the type says whether they are needed: type follows content
// in model_dump order.
func (d *mpDecoder) scanMessageMap(t mpToken, depth int) (Message, error) {
	if depth+1 > d.maxDepth {
		return Message{}, depthError(d.maxDepth, depth+1, t.off)
	}
	var m Message
	contentAt, idAt, kwargsAt := -1, -1, -1
	for range t.n {
		key, err := d.scanKey(depth + 1)
		if err != nil {
			return Message{}, err
		}
		at := d.pos
		switch key {
		case "type":
			if m.Type, err = d.scanType(depth + 1); err != nil {
				return Message{}, err
			}
			continue
		case "content":
			contentAt = at
		case "id":
			idAt = at
		case "additional_kwargs":
			kwargsAt = at
		}
		if err := d.skipValues(1, depth+1); err != nil {
			return Message{}, err
		}
	}
	human := m.Type == "human"
	if !human && d.mode != All {
		return Message{Type: m.Type}, nil
	}
	if d.mode == CountOnly {
		return m, nil
	}
	// The values around the fields are all accounted for, so pending is set
	// aside while they are decoded.
	endAt, pending := d.pos, d.pending
	defer func() { d.pos, d.pending = endAt, pending }()
	decodeAt := func(at int) (any, error) {
		d.pos, d.pending = at, 0
		return d.decodeValue(depth + 1)
	}
	if idAt >= 0 {
		v, err := decodeAt(idAt)
		if err != nil {
			return Message{}, err
		}
		m.ID, _ = v.(string)
	}
	if !human {
		return m, nil
	}
	if d.known != nil && m.ID != "" && d.known(m.ID) {
		m.Known = true
		return m, nil
	}
	if kwargsAt >= 0 {
		v, err := decodeAt(kwargsAt)
		if err != nil {
			return Message{}, err
		}
		m.Synthetic = isSynthetic(v)
	}
	if contentAt >= 0 {
		content, err := decodeAt(contentAt)
		if err != nil {
			return Message{}, err
		}
		m.Text = messageText(content)
	}
	return m, nil
}

// scanType reads a message's type. Only extension values are decoded,
// since they could decode to a string; the common types are not copied.
func (d *mpDecoder) scanType(depth int) (string, error) {
	start := d.pos
	pending := d.pending
	d.started()
	t, err := d.readToken()
	if err != nil {
		return "", err
	}
	switch t.kind {
	case mpStr:
		return messageType(d.buf[t.start : t.start+t.n]), nil
	case mpArray, mpMap:
		d.pos, d.pending = start, pending
		return "", d.skipValues(1, depth)
	case mpExt:
		d.pos, d.pending = start, pending
		v, err := d.decodeValue(depth)
		s, _ := v.(string)
		return s, err
	}
	return "", nil
}

// scanKey reads a map key and returns its text when it could be one of the
// fields scanMessageMap reads, else "". Only strings, bytes (via base64)
// and extensions (via their decoded value) can have such a text.
func (d *mpDecoder) scanKey(depth int) (string, error) {
	start := d.pos
	pending := d.pending
	d.started()
	t, err := d.readToken()
	if err != nil {
		return "", err
	}
	switch t.kind {
	case mpStr:
		switch string(d.buf[t.start : t.start+t.n]) {
		case "type":
			return "type", nil
		case "content":
			return "content", nil
		case "id":
			return "id", nil
		case "additional_kwargs":
			return "additional_kwargs", nil
		}
	case mpBin:
		// Keyed by their base64 text, bytes name a field only when that
		// text does: 3 bytes give "type", 12 "additional_kwargs"… none of
		// the field names is valid base64 of another length.
		if k := base64.StdEncoding.EncodeToString(d.buf[t.start : t.start+t.n]); messageField(k) {
			return k, nil
		}
	case mpArray, mpMap:
		if depth+1 > d.maxDepth {
			return "", depthError(d.maxDepth, depth+1, t.off)
		}
		n := t.n
		if t.kind == mpMap {
			n *= 2
		}
		return "", d.skipValues(n, depth+1)
	case mpExt:
		// Undo the read and decode the key whole; extension keys are rare
		// and small.
		d.pos, d.pending = start, pending
		k, err := d.decodeValue(depth)
		if err != nil {
			return "", err
		}
		return d.keys.text(k, start)
	}
	return "", nil
}

// isSecretName is isSecretClass over raw msgpack str bytes.
func isSecretName(module, class []byte) bool {
	return bytes.HasPrefix(module, []byte("pydantic")) && bytes.HasPrefix(class, []byte("Secret"))
}
