package codec

import (
	"bytes"
	"encoding/base64"
	"errors"

	"github.com/historyd/historyd/langgraph/codec/internal/mptoken"
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
	if d.Pos != d.End {
		return Messages{}, d.Malformed(d.Pos, "%d trailing bytes after the value", d.End-d.Pos)
	}
	return out, nil
}

// scanList reads the messages list, looking through extension wrappers the
// way decodeExt does so both agree on what the list is.
func (d *mpDecoder) scanList(depth int, out *Messages) error {
	d.Started()
	t, err := d.ReadToken()
	if err != nil {
		return err
	}
	switch t.Kind {
	case mptoken.Array:
		if depth+1 > d.maxDepth {
			return depthError(d.maxDepth, depth+1, t.Off)
		}
		out.Count = t.N
		for range t.N {
			m, err := d.scanMessage(depth + 1)
			if err != nil {
				return err
			}
			out.add(m, d.mode)
		}
		return nil
	case mptoken.Ext:
		if t.Code == extNumpyArray {
			v, err := d.decodeExt(t, depth)
			if err != nil {
				return err
			}
			*out, err = messagesFromValue(format.TypeMsgpack, v, d.mode)
			var me *MalformedError
			if errors.As(err, &me) {
				me.Offset = t.Off
			}
			return err
		}
		return d.scanTuple(t, depth, func(depth int) error { return d.scanList(depth, out) },
			func() error {
				return d.Malformed(t.Off, "messages value is a secret, not a list")
			})
	}
	return d.Malformed(t.Off, "messages value is %s, not a list", mptoken.What(t))
}

// scanTuple opens an extension payload and hands its data item to inner.
// secret runs instead when the extension is a pydantic secret.
func (d *mpDecoder) scanTuple(t mptoken.Token, depth int, inner func(depth int) error, secret func() error) error {
	if t.Code < extConstructorSingleArg || t.Code > extPydanticV2 {
		return d.unsupportedExt(t)
	}
	savedEnd, savedPending, err := d.enterExt(t)
	if err != nil {
		return err
	}
	d.Started()
	h, err := d.ReadToken()
	if err != nil {
		return err
	}
	if h.Kind != mptoken.Array || h.N < 3 {
		return d.Malformed(t.Off, "ext %d payload is not a (module, class, data, ...) tuple", t.Code)
	}
	if depth+1 > d.maxDepth {
		return depthError(d.maxDepth, depth+1, h.Off)
	}
	module, err := d.scanName(depth + 1)
	if err != nil {
		return err
	}
	class, err := d.scanName(depth + 1)
	if err != nil {
		return err
	}
	if t.Code == extConstructorSingleArg && isSecretName(module, class) {
		if err := d.skipValues(1, depth+1); err != nil {
			return err
		}
		if err := secret(); err != nil {
			return err
		}
	} else if err := inner(depth + 1); err != nil {
		return err
	}
	if err := d.skipValues(h.N-3, depth+1); err != nil {
		return err
	}
	return d.leaveExt(t, savedEnd, savedPending)
}

// scanName reads the module or class name of an extension payload, without
// allocating when it is a plain string. An extension is decoded, since it
// may decode to a string as Decode would see it; other values are skipped,
// as they can never name a pydantic secret class.
func (d *mpDecoder) scanName(depth int) ([]byte, error) {
	start := d.Pos
	pending := d.Pending
	d.Started()
	t, err := d.ReadToken()
	if err != nil {
		return nil, err
	}
	switch t.Kind {
	case mptoken.Str:
		return d.Buf[t.Start : t.Start+t.N], nil
	case mptoken.Array, mptoken.Map:
		d.Pos, d.Pending = start, pending
		return nil, d.skipValues(1, depth)
	case mptoken.Ext:
		d.Pos, d.Pending = start, pending
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
	d.Started()
	t, err := d.ReadToken()
	if err != nil {
		return Message{}, err
	}
	switch t.Kind {
	case mptoken.Map:
		return d.scanMessageMap(t, depth)
	case mptoken.Array:
		if depth+1 > d.maxDepth {
			return Message{}, depthError(d.maxDepth, depth+1, t.Off)
		}
		return Message{}, d.skipValues(t.N, depth+1)
	case mptoken.Ext:
		if t.Code == extNumpyArray {
			// Its payload was stepped over with the token; an array is
			// never a message.
			return Message{}, nil
		}
		if d.mode != All {
			if typ, ok := d.knownClass(t); ok {
				// A LangChain message class that is never a question: its
				// payload (tool calls, metadata, content) is stepped over
				// by the extension's length, unread.
				d.Pos = t.Start + t.N
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
func (d *mpDecoder) knownClass(t mptoken.Token) (string, bool) {
	if t.Code != extPydanticV2 {
		return "", false
	}
	pos, end, pending := d.Pos, d.End, d.Pending
	defer func() { d.Pos, d.End, d.Pending = pos, end, pending }()
	d.Pos, d.End, d.Pending = t.Start, t.Start+t.N, 0
	h, err := d.ReadToken()
	if err != nil || h.Kind != mptoken.Array || h.N < 3 {
		return "", false
	}
	var names [2][]byte
	for i := range names {
		n, err := d.ReadToken()
		if err != nil || n.Kind != mptoken.Str {
			return "", false
		}
		names[i] = d.Buf[n.Start : n.Start+n.N]
	}
	return fixedType(names[0], names[1])
}

// scanMessageMap reads a message's field map, whose header t has been
// read. Keys are compared in their decoded form, as Decode would key them.
// The fields a mode needs are stepped over when met and decoded after the
// map, once the type says whether they are needed: type follows content
// in model_dump order.
func (d *mpDecoder) scanMessageMap(t mptoken.Token, depth int) (Message, error) {
	if depth+1 > d.maxDepth {
		return Message{}, depthError(d.maxDepth, depth+1, t.Off)
	}
	var m Message
	contentAt, idAt, kwargsAt := -1, -1, -1
	for range t.N {
		key, err := d.scanKey(depth + 1)
		if err != nil {
			return Message{}, err
		}
		at := d.Pos
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
	endAt, pending := d.Pos, d.Pending
	defer func() { d.Pos, d.Pending = endAt, pending }()
	decodeAt := func(at int) (any, error) {
		d.Pos, d.Pending = at, 0
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
	start := d.Pos
	pending := d.Pending
	d.Started()
	t, err := d.ReadToken()
	if err != nil {
		return "", err
	}
	switch t.Kind {
	case mptoken.Str:
		return messageType(d.Buf[t.Start : t.Start+t.N]), nil
	case mptoken.Array, mptoken.Map:
		d.Pos, d.Pending = start, pending
		return "", d.skipValues(1, depth)
	case mptoken.Ext:
		d.Pos, d.Pending = start, pending
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
	start := d.Pos
	pending := d.Pending
	d.Started()
	t, err := d.ReadToken()
	if err != nil {
		return "", err
	}
	switch t.Kind {
	case mptoken.Str:
		switch string(d.Buf[t.Start : t.Start+t.N]) {
		case "type":
			return "type", nil
		case "content":
			return "content", nil
		case "id":
			return "id", nil
		case "additional_kwargs":
			return "additional_kwargs", nil
		}
	case mptoken.Bin:
		// Keyed by their base64 text, bytes name a field only when that
		// text does: 3 bytes give "type", 12 "additional_kwargs"… none of
		// the field names is valid base64 of another length.
		if k := base64.StdEncoding.EncodeToString(d.Buf[t.Start : t.Start+t.N]); messageField(k) {
			return k, nil
		}
	case mptoken.Array, mptoken.Map:
		if depth+1 > d.maxDepth {
			return "", depthError(d.maxDepth, depth+1, t.Off)
		}
		n := t.N
		if t.Kind == mptoken.Map {
			n *= 2
		}
		return "", d.skipValues(n, depth+1)
	case mptoken.Ext:
		// Undo the read and decode the key whole; extension keys are rare
		// and small.
		d.Pos, d.Pending = start, pending
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
