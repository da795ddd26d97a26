package codec

import (
	"fmt"
	"strings"

	"github.com/historyd/historyd/langgraph/format"
)

// ScanMessages reads a messages channel value (a list of LangChain
// messages) and counts messages and human messages without building the
// others: in msgpack they are stepped over, only their "type" read, and for
// human messages their text.
//
// A message is human when its "type" is "human" (after the JSON mapping of
// Decode, which gives LangChain.js messages their type from the class name).
// Its text is LangChain's BaseMessage.text: string content as is, or the
// concatenation of the string blocks and the {"type": "text", "text": "..."}
// blocks of list content.
//
// An "empty" blob (the channel has no value yet) has no messages; a
// DeltaChannel snapshot reads as the list it holds. Any other value that is
// not a list is a *MalformedError. Skipped messages are only checked for
// well-formed structure, so ScanMessages may accept a blob that Decode
// rejects, never the other way round. JSON has no lengths to skip by, so a
// "json" value is decoded whole (as Decode would) and then read.
func ScanMessages(blobType string, data []byte, lim Limits) (Messages, error) {
	return ReadMessages(blobType, data, lim, Humans)
}

// CountMessages is ScanMessages without the texts: Humans stays nil and
// HumanCount says how many there are. No human message's content is
// decoded, so counting every checkpoint of a long thread builds no text.
func CountMessages(blobType string, data []byte, lim Limits) (Messages, error) {
	return ReadMessages(blobType, data, lim, CountOnly)
}

// ReadMessages reads a messages channel value as ScanMessages does, keeping
// what mode asks for in Messages.List.
func ReadMessages(blobType string, data []byte, lim Limits, mode ReadMode) (Messages, error) {
	return ReadMessagesKnowing(blobType, data, lim, mode, nil)
}

// ReadMessagesKnowing is ReadMessages for a reader that already knows some
// human messages by id: a human message whose id known reports is kept
// with Known set and neither its text nor its marks read. A long thread's
// every messages version holds every earlier question again, so turn
// derivation reads each question's text once, not once per version.
// known may be nil; it is only consulted for msgpack values (JSON has no
// lengths to skip by and is decoded whole).
func ReadMessagesKnowing(blobType string, data []byte, lim Limits, mode ReadMode, known func(id string) bool) (Messages, error) {
	lim = lim.withDefaults()
	switch blobType {
	case format.TypeEmpty:
		return Messages{}, nil
	case format.TypeNull:
		return Messages{}, &MalformedError{Format: blobType, Offset: 0, Reason: "messages value is null, not a list"}
	}
	if err := checkDecodable(blobType, data, lim); err != nil {
		return Messages{}, err
	}
	switch blobType {
	case format.TypeMsgpack:
		return scanMsgpackMessages(data, lim, mode, known)
	case format.TypeJSON:
		v, err := decodeJSON(data, lim)
		if err != nil {
			return Messages{}, err
		}
		return messagesFromValue(blobType, v, mode)
	default:
		return Messages{}, &MalformedError{Format: blobType, Offset: 0, Reason: "messages value is raw bytes, not a list"}
	}
}

// messagesFromValue derives Messages from an already decoded value.
func messagesFromValue(format string, v any, mode ReadMode) (Messages, error) {
	list, ok := v.([]any)
	if !ok {
		return Messages{}, &MalformedError{Format: format, Offset: 0,
			Reason: "messages value is " + kindOf(v) + ", not a list"}
	}
	out := Messages{Count: len(list)}
	for _, item := range list {
		m, _ := item.(map[string]any)
		out.add(decodedMessage(m), mode)
	}
	return out, nil
}

// messageText is LangChain's BaseMessage.text over decoded content.
func messageText(content any) string {
	switch c := content.(type) {
	case string:
		return c
	case []any:
		var b strings.Builder
		for _, block := range c {
			switch blk := block.(type) {
			case string:
				b.WriteString(blk)
			case map[string]any:
				if t, _ := blk["type"].(string); t == "text" {
					if s, ok := blk["text"].(string); ok {
						b.WriteString(s)
					}
				}
			}
		}
		return b.String()
	}
	return ""
}

// ReadMode is what a read of a messages list keeps of each message.
type ReadMode int

const (
	// CountOnly counts messages and human messages and keeps nothing.
	CountOnly ReadMode = iota
	// Humans keeps each human message: its id, text, and whether it is
	// synthetic. Turn derivation numbers questions by them.
	Humans
	// All keeps every message: its type and id, and for human messages
	// their text and whether they are synthetic. Rebuilding a DeltaChannel
	// list from writes needs every id, since a write may remove or replace
	// any message by its id.
	All
)

// Message is what historyd reads of one LangChain message.
type Message struct {
	// Type is the message's type: "human", "ai", "tool", "system",
	// "remove", …; empty for an element that is no message.
	Type string
	// ID is the message's id; empty when it has none.
	ID string
	// Text is a human message's text (LangChain's BaseMessage.text).
	Text string
	// Synthetic says a human message was added by the agent harness rather
	// than typed by the user: a summary, a notification (see isSynthetic).
	Synthetic bool
	// Known says the message is a human message whose id the reader
	// already knows (ReadMessagesKnowing): its text and marks were not
	// read, and Text and Synthetic are unset.
	Known bool
}

// Question reports whether the message is a question the user asked: a
// human message nobody else wrote.
func (m Message) Question() bool { return m.Type == "human" && !m.Synthetic }

// Messages is what turn derivation reads of a messages channel value.
type Messages struct {
	// Count is the number of messages in the list.
	Count int
	// Humans holds the text of each human message, in order, when the read
	// kept human messages.
	Humans []string
	// HumanCount is the number of human messages: len(Humans), also when
	// CountMessages leaves Humans out.
	HumanCount int
	// List holds, in order, the messages the read's mode keeps: the human
	// ones (Humans) or all (All).
	List []Message
}

func (out *Messages) add(m Message, mode ReadMode) {
	human := m.Type == "human"
	if human {
		out.HumanCount++
	}
	switch {
	case mode == All, mode == Humans && human:
		out.List = append(out.List, m)
	}
	if human && mode != CountOnly {
		out.Humans = append(out.Humans, m.Text)
	}
}

// knownTypes are the message types LangChain writes, so that reading one
// allocates nothing.
var knownTypes = []string{"human", "ai", "tool", "system", "remove", "function", "chat"}

// messageType returns the type named by b, without a copy for the known
// ones.
func messageType(b []byte) string {
	for _, t := range knownTypes {
		if string(b) == t {
			return t
		}
	}
	return validString(b)
}

// messageField reports whether a key names a field scanMessageMap reads.
func messageField(k string) bool {
	switch k {
	case "type", "content", "id", "additional_kwargs":
		return true
	}
	return false
}

// decodedMessage reads a message as Decode gives it: a field map.
func decodedMessage(m map[string]any) Message {
	if m == nil {
		return Message{}
	}
	var out Message
	out.Type, _ = m["type"].(string)
	out.ID, _ = m["id"].(string)
	if out.Type == "human" {
		out.Text = messageText(m["content"])
		out.Synthetic = isSynthetic(m["additional_kwargs"])
	}
	return out
}

// isSynthetic reports whether a human message's additional_kwargs mark it
// as added by the agent harness rather than typed by the user. The markers
// are the ones LangChain, LangChain.js and deepagents set:
//
//   - "lc_source", a non-empty string: LangChain's SummarizationMiddleware
//     and LangChain.js's summarizationMiddleware ("summarization"),
//     deepagents' pinned skills and rubric grader, and every message marked
//     with langchain_core's add_notification_metadata;
//   - "deepagents_notification", a map: deepagents' subagent notifications;
//   - "read_file_media_result" true: deepagents handing a file's media to
//     the model as a human message.
func isSynthetic(kwargs any) bool {
	m, _ := kwargs.(map[string]any)
	if s, ok := m["lc_source"].(string); ok && s != "" {
		return true
	}
	if _, ok := m["deepagents_notification"].(map[string]any); ok {
		return true
	}
	return m["read_file_media_result"] == true
}

// MessageWrite is one write to a messages channel, read for rebuilding the
// list: LangGraph's messages reducers take a message, a list of them, or an
// Overwrite of the whole list.
type MessageWrite struct {
	// Overwrite says the write replaces the whole list
	// (langgraph.types.Overwrite), bypassing the reducer.
	Overwrite bool
	// Messages are the written messages, in order. RemoveMessages have type
	// "remove"; an ID of format.RemoveAll clears the list.
	Messages []Message
}

// ReadMessageWrite reads one stored write to a messages channel. Messages
// may be written as LangChain objects or, as graph inputs often are, as
// the plain forms LangChain's convert_to_messages accepts: a string (a
// human message), a (role, content) pair, or a map with "role" or "type"
// and "content". Anything else is an *UnsupportedError: no messages reducer
// applies it, and guessing would number questions wrong.
func ReadMessageWrite(blobType string, data []byte, lim Limits) (MessageWrite, error) {
	v, ok, err := Decode(blobType, data, lim)
	if err != nil {
		return MessageWrite{}, err
	}
	if !ok || v == nil {
		return MessageWrite{}, nil
	}
	var out MessageWrite
	if inner, isOverwrite := Overwritten(v); isOverwrite {
		out.Overwrite, v = true, inner
	}
	items, isList := v.([]any)
	if !isList {
		items = []any{v}
	}
	if v == nil {
		items = nil
	}
	for _, item := range items {
		m, err := messageLike(item)
		if err != nil {
			return MessageWrite{}, &UnsupportedError{Format: blobType, Feature: "messages write", Offset: -1, Reason: err.Error()}
		}
		out.Messages = append(out.Messages, m)
	}
	return out, nil
}

// Overwritten reports whether a decoded write is an Overwrite and returns
// the value it writes, in the forms LangGraph recognizes: the Overwrite
// dataclass (its fields {"value", "type": "__overwrite__"}, as the
// serializer stores it), and the {"__overwrite__": value} map LangChain.js
// stores.
func Overwritten(v any) (any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	if inner, ok := m["__overwrite__"]; ok && len(m) == 1 {
		return inner, true
	}
	if m["type"] == "__overwrite__" {
		if inner, ok := m["value"]; ok {
			return inner, true
		}
	}
	return nil, false
}

// messageLike reads one element of a messages write as
// convert_to_messages would take it.
func messageLike(v any) (Message, error) {
	switch x := v.(type) {
	case string:
		return Message{Type: "human", Text: x}, nil
	case []any:
		if len(x) == 2 {
			if role, ok := x[0].(string); ok {
				return roleMessage(role, x[1], "")
			}
		}
	case map[string]any:
		if _, ok := x["type"].(string); ok {
			return decodedMessage(x), nil
		}
		if role, ok := x["role"].(string); ok {
			id, _ := x["id"].(string)
			return roleMessage(role, x["content"], id)
		}
	}
	return Message{}, fmt.Errorf("%s is not a message", kindOf(v))
}

// roleMessage is convert_to_messages's mapping of chat roles to types.
func roleMessage(role string, content any, id string) (Message, error) {
	var typ string
	switch strings.ToLower(role) {
	case "human", "user":
		typ = "human"
	case "ai", "assistant":
		typ = "ai"
	case "system", "developer":
		typ = "system"
	case "tool":
		typ = "tool"
	case "function":
		typ = "function"
	case "remove":
		typ = "remove"
	default:
		return Message{}, fmt.Errorf("message role %q is not one LangChain knows", role)
	}
	m := Message{Type: typ, ID: id}
	if typ == "human" {
		m.Text = messageText(content)
	}
	return m, nil
}
