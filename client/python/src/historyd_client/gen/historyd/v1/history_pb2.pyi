import datetime

from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TurnNumbering(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TURN_NUMBERING_UNSPECIFIED: _ClassVar[TurnNumbering]
    TURN_NUMBERING_COMPLETE: _ClassVar[TurnNumbering]
    TURN_NUMBERING_COUNTED: _ClassVar[TurnNumbering]
    TURN_NUMBERING_ESTIMATED: _ClassVar[TurnNumbering]

class ValueFormat(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VALUE_FORMAT_UNSPECIFIED: _ClassVar[ValueFormat]
    VALUE_FORMAT_PROTO: _ClassVar[ValueFormat]
    VALUE_FORMAT_JSON: _ClassVar[ValueFormat]
TURN_NUMBERING_UNSPECIFIED: TurnNumbering
TURN_NUMBERING_COMPLETE: TurnNumbering
TURN_NUMBERING_COUNTED: TurnNumbering
TURN_NUMBERING_ESTIMATED: TurnNumbering
VALUE_FORMAT_UNSPECIFIED: ValueFormat
VALUE_FORMAT_PROTO: ValueFormat
VALUE_FORMAT_JSON: ValueFormat

class SnapshotsRequest(_message.Message):
    __slots__ = ("thread_id", "checkpoint_ns", "keys", "channel", "value_format")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_NS_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    VALUE_FORMAT_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    checkpoint_ns: str
    keys: _containers.RepeatedScalarFieldContainer[str]
    channel: str
    value_format: ValueFormat
    def __init__(self, thread_id: _Optional[str] = ..., checkpoint_ns: _Optional[str] = ..., keys: _Optional[_Iterable[str]] = ..., channel: _Optional[str] = ..., value_format: _Optional[_Union[ValueFormat, str]] = ...) -> None: ...

class SnapshotsResponse(_message.Message):
    __slots__ = ("turns", "total", "numbering")
    class TurnsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: TurnState
        def __init__(self, key: _Optional[int] = ..., value: _Optional[_Union[TurnState, _Mapping]] = ...) -> None: ...
    TURNS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    NUMBERING_FIELD_NUMBER: _ClassVar[int]
    turns: _containers.MessageMap[int, TurnState]
    total: int
    numbering: TurnNumbering
    def __init__(self, turns: _Optional[_Mapping[int, TurnState]] = ..., total: _Optional[int] = ..., numbering: _Optional[_Union[TurnNumbering, str]] = ...) -> None: ...

class StreamSnapshotsRequest(_message.Message):
    __slots__ = ("thread_id", "checkpoint_ns", "keys", "from_turn", "channel", "value_format")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_NS_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    FROM_TURN_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    VALUE_FORMAT_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    checkpoint_ns: str
    keys: _containers.RepeatedScalarFieldContainer[str]
    from_turn: int
    channel: str
    value_format: ValueFormat
    def __init__(self, thread_id: _Optional[str] = ..., checkpoint_ns: _Optional[str] = ..., keys: _Optional[_Iterable[str]] = ..., from_turn: _Optional[int] = ..., channel: _Optional[str] = ..., value_format: _Optional[_Union[ValueFormat, str]] = ...) -> None: ...

class StreamSnapshotsResponse(_message.Message):
    __slots__ = ("turn", "total", "numbering")
    TURN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    NUMBERING_FIELD_NUMBER: _ClassVar[int]
    turn: TurnState
    total: int
    numbering: TurnNumbering
    def __init__(self, turn: _Optional[_Union[TurnState, _Mapping]] = ..., total: _Optional[int] = ..., numbering: _Optional[_Union[TurnNumbering, str]] = ...) -> None: ...

class SnapshotRequest(_message.Message):
    __slots__ = ("thread_id", "turn", "checkpoint_ns", "keys", "channel", "value_format")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_NS_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    VALUE_FORMAT_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    turn: int
    checkpoint_ns: str
    keys: _containers.RepeatedScalarFieldContainer[str]
    channel: str
    value_format: ValueFormat
    def __init__(self, thread_id: _Optional[str] = ..., turn: _Optional[int] = ..., checkpoint_ns: _Optional[str] = ..., keys: _Optional[_Iterable[str]] = ..., channel: _Optional[str] = ..., value_format: _Optional[_Union[ValueFormat, str]] = ...) -> None: ...

class SnapshotResponse(_message.Message):
    __slots__ = ("state", "no_such_turn", "no_longer_retained", "total", "retained_turns", "numbering")
    STATE_FIELD_NUMBER: _ClassVar[int]
    NO_SUCH_TURN_FIELD_NUMBER: _ClassVar[int]
    NO_LONGER_RETAINED_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    RETAINED_TURNS_FIELD_NUMBER: _ClassVar[int]
    NUMBERING_FIELD_NUMBER: _ClassVar[int]
    state: TurnState
    no_such_turn: NoSuchTurn
    no_longer_retained: NoLongerRetained
    total: int
    retained_turns: _containers.RepeatedScalarFieldContainer[int]
    numbering: TurnNumbering
    def __init__(self, state: _Optional[_Union[TurnState, _Mapping]] = ..., no_such_turn: _Optional[_Union[NoSuchTurn, _Mapping]] = ..., no_longer_retained: _Optional[_Union[NoLongerRetained, _Mapping]] = ..., total: _Optional[int] = ..., retained_turns: _Optional[_Iterable[int]] = ..., numbering: _Optional[_Union[TurnNumbering, str]] = ...) -> None: ...

class NoSuchTurn(_message.Message):
    __slots__ = ("turn", "total")
    TURN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    turn: int
    total: int
    def __init__(self, turn: _Optional[int] = ..., total: _Optional[int] = ...) -> None: ...

class NoLongerRetained(_message.Message):
    __slots__ = ("turn", "question")
    TURN_FIELD_NUMBER: _ClassVar[int]
    QUESTION_FIELD_NUMBER: _ClassVar[int]
    turn: int
    question: str
    def __init__(self, turn: _Optional[int] = ..., question: _Optional[str] = ...) -> None: ...

class TurnsRequest(_message.Message):
    __slots__ = ("thread_id", "checkpoint_ns", "include_keys_written", "channel")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_NS_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_KEYS_WRITTEN_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    checkpoint_ns: str
    include_keys_written: bool
    channel: str
    def __init__(self, thread_id: _Optional[str] = ..., checkpoint_ns: _Optional[str] = ..., include_keys_written: _Optional[bool] = ..., channel: _Optional[str] = ...) -> None: ...

class TurnsResponse(_message.Message):
    __slots__ = ("turns", "total", "numbering")
    TURNS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    NUMBERING_FIELD_NUMBER: _ClassVar[int]
    turns: _containers.RepeatedCompositeFieldContainer[TurnInfo]
    total: int
    numbering: TurnNumbering
    def __init__(self, turns: _Optional[_Iterable[_Union[TurnInfo, _Mapping]]] = ..., total: _Optional[int] = ..., numbering: _Optional[_Union[TurnNumbering, str]] = ...) -> None: ...

class TurnInfo(_message.Message):
    __slots__ = ("number", "question", "retained", "checkpoint_id", "ended_at", "keys_written", "answered_with")
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    QUESTION_FIELD_NUMBER: _ClassVar[int]
    RETAINED_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    ENDED_AT_FIELD_NUMBER: _ClassVar[int]
    KEYS_WRITTEN_FIELD_NUMBER: _ClassVar[int]
    ANSWERED_WITH_FIELD_NUMBER: _ClassVar[int]
    number: int
    question: str
    retained: bool
    checkpoint_id: str
    ended_at: _timestamp_pb2.Timestamp
    keys_written: _containers.RepeatedScalarFieldContainer[str]
    answered_with: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, number: _Optional[int] = ..., question: _Optional[str] = ..., retained: _Optional[bool] = ..., checkpoint_id: _Optional[str] = ..., ended_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., keys_written: _Optional[_Iterable[str]] = ..., answered_with: _Optional[_Iterable[int]] = ...) -> None: ...

class TurnState(_message.Message):
    __slots__ = ("turn", "checkpoint_id", "question", "entries", "ended_at", "answered_with")
    class EntriesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: StateEntry
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[StateEntry, _Mapping]] = ...) -> None: ...
    TURN_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    QUESTION_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    ENDED_AT_FIELD_NUMBER: _ClassVar[int]
    ANSWERED_WITH_FIELD_NUMBER: _ClassVar[int]
    turn: int
    checkpoint_id: str
    question: str
    entries: _containers.MessageMap[str, StateEntry]
    ended_at: _timestamp_pb2.Timestamp
    answered_with: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, turn: _Optional[int] = ..., checkpoint_id: _Optional[str] = ..., question: _Optional[str] = ..., entries: _Optional[_Mapping[str, StateEntry]] = ..., ended_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., answered_with: _Optional[_Iterable[int]] = ...) -> None: ...

class StateEntry(_message.Message):
    __slots__ = ("value", "tool", "seq", "turn", "turns_written", "inputs", "extra", "value_json")
    class InputsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    VALUE_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    TURNS_WRITTEN_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    EXTRA_FIELD_NUMBER: _ClassVar[int]
    VALUE_JSON_FIELD_NUMBER: _ClassVar[int]
    value: _struct_pb2.Value
    tool: str
    seq: int
    turn: int
    turns_written: int
    inputs: _containers.ScalarMap[str, str]
    extra: _struct_pb2.Struct
    value_json: bytes
    def __init__(self, value: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., tool: _Optional[str] = ..., seq: _Optional[int] = ..., turn: _Optional[int] = ..., turns_written: _Optional[int] = ..., inputs: _Optional[_Mapping[str, str]] = ..., extra: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., value_json: _Optional[bytes] = ...) -> None: ...
