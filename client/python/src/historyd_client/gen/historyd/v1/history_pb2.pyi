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
    TURN_NUMBERING_RUNS: _ClassVar[TurnNumbering]

class ValueFormat(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VALUE_FORMAT_UNSPECIFIED: _ClassVar[ValueFormat]
    VALUE_FORMAT_PROTO: _ClassVar[ValueFormat]
    VALUE_FORMAT_JSON: _ClassVar[ValueFormat]

class ThreadsOrder(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    THREADS_ORDER_UNSPECIFIED: _ClassVar[ThreadsOrder]
    THREADS_ORDER_THREAD_ID: _ClassVar[ThreadsOrder]
    THREADS_ORDER_LAST_ACTIVITY: _ClassVar[ThreadsOrder]

class KeyChangeKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    KEY_CHANGE_KIND_UNSPECIFIED: _ClassVar[KeyChangeKind]
    KEY_CHANGE_KIND_ADDED: _ClassVar[KeyChangeKind]
    KEY_CHANGE_KIND_REMOVED: _ClassVar[KeyChangeKind]
    KEY_CHANGE_KIND_CHANGED: _ClassVar[KeyChangeKind]
    KEY_CHANGE_KIND_UNCHANGED: _ClassVar[KeyChangeKind]
TURN_NUMBERING_UNSPECIFIED: TurnNumbering
TURN_NUMBERING_COMPLETE: TurnNumbering
TURN_NUMBERING_COUNTED: TurnNumbering
TURN_NUMBERING_ESTIMATED: TurnNumbering
TURN_NUMBERING_RUNS: TurnNumbering
VALUE_FORMAT_UNSPECIFIED: ValueFormat
VALUE_FORMAT_PROTO: ValueFormat
VALUE_FORMAT_JSON: ValueFormat
THREADS_ORDER_UNSPECIFIED: ThreadsOrder
THREADS_ORDER_THREAD_ID: ThreadsOrder
THREADS_ORDER_LAST_ACTIVITY: ThreadsOrder
KEY_CHANGE_KIND_UNSPECIFIED: KeyChangeKind
KEY_CHANGE_KIND_ADDED: KeyChangeKind
KEY_CHANGE_KIND_REMOVED: KeyChangeKind
KEY_CHANGE_KIND_CHANGED: KeyChangeKind
KEY_CHANGE_KIND_UNCHANGED: KeyChangeKind

class SnapshotsRequest(_message.Message):
    __slots__ = ("thread_id", "checkpoint_ns", "keys", "channel", "value_format", "head_checkpoint_id")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_NS_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    VALUE_FORMAT_FIELD_NUMBER: _ClassVar[int]
    HEAD_CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    checkpoint_ns: str
    keys: _containers.RepeatedScalarFieldContainer[str]
    channel: str
    value_format: ValueFormat
    head_checkpoint_id: str
    def __init__(self, thread_id: _Optional[str] = ..., checkpoint_ns: _Optional[str] = ..., keys: _Optional[_Iterable[str]] = ..., channel: _Optional[str] = ..., value_format: _Optional[_Union[ValueFormat, str]] = ..., head_checkpoint_id: _Optional[str] = ...) -> None: ...

class SnapshotsResponse(_message.Message):
    __slots__ = ("turns", "total", "numbering", "head_checkpoint_id")
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
    HEAD_CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    turns: _containers.MessageMap[int, TurnState]
    total: int
    numbering: TurnNumbering
    head_checkpoint_id: str
    def __init__(self, turns: _Optional[_Mapping[int, TurnState]] = ..., total: _Optional[int] = ..., numbering: _Optional[_Union[TurnNumbering, str]] = ..., head_checkpoint_id: _Optional[str] = ...) -> None: ...

class StreamSnapshotsRequest(_message.Message):
    __slots__ = ("thread_id", "checkpoint_ns", "keys", "from_turn", "channel", "value_format", "head_checkpoint_id")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_NS_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    FROM_TURN_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    VALUE_FORMAT_FIELD_NUMBER: _ClassVar[int]
    HEAD_CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    checkpoint_ns: str
    keys: _containers.RepeatedScalarFieldContainer[str]
    from_turn: int
    channel: str
    value_format: ValueFormat
    head_checkpoint_id: str
    def __init__(self, thread_id: _Optional[str] = ..., checkpoint_ns: _Optional[str] = ..., keys: _Optional[_Iterable[str]] = ..., from_turn: _Optional[int] = ..., channel: _Optional[str] = ..., value_format: _Optional[_Union[ValueFormat, str]] = ..., head_checkpoint_id: _Optional[str] = ...) -> None: ...

class StreamSnapshotsResponse(_message.Message):
    __slots__ = ("turn", "total", "numbering", "head_checkpoint_id")
    TURN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    NUMBERING_FIELD_NUMBER: _ClassVar[int]
    HEAD_CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    turn: TurnState
    total: int
    numbering: TurnNumbering
    head_checkpoint_id: str
    def __init__(self, turn: _Optional[_Union[TurnState, _Mapping]] = ..., total: _Optional[int] = ..., numbering: _Optional[_Union[TurnNumbering, str]] = ..., head_checkpoint_id: _Optional[str] = ...) -> None: ...

class SnapshotRequest(_message.Message):
    __slots__ = ("thread_id", "turn", "checkpoint_ns", "keys", "channel", "value_format", "head_checkpoint_id")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_NS_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    VALUE_FORMAT_FIELD_NUMBER: _ClassVar[int]
    HEAD_CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    turn: int
    checkpoint_ns: str
    keys: _containers.RepeatedScalarFieldContainer[str]
    channel: str
    value_format: ValueFormat
    head_checkpoint_id: str
    def __init__(self, thread_id: _Optional[str] = ..., turn: _Optional[int] = ..., checkpoint_ns: _Optional[str] = ..., keys: _Optional[_Iterable[str]] = ..., channel: _Optional[str] = ..., value_format: _Optional[_Union[ValueFormat, str]] = ..., head_checkpoint_id: _Optional[str] = ...) -> None: ...

class SnapshotResponse(_message.Message):
    __slots__ = ("state", "no_such_turn", "no_longer_retained", "total", "retained_turns", "numbering", "head_checkpoint_id")
    STATE_FIELD_NUMBER: _ClassVar[int]
    NO_SUCH_TURN_FIELD_NUMBER: _ClassVar[int]
    NO_LONGER_RETAINED_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    RETAINED_TURNS_FIELD_NUMBER: _ClassVar[int]
    NUMBERING_FIELD_NUMBER: _ClassVar[int]
    HEAD_CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    state: TurnState
    no_such_turn: NoSuchTurn
    no_longer_retained: NoLongerRetained
    total: int
    retained_turns: _containers.RepeatedScalarFieldContainer[int]
    numbering: TurnNumbering
    head_checkpoint_id: str
    def __init__(self, state: _Optional[_Union[TurnState, _Mapping]] = ..., no_such_turn: _Optional[_Union[NoSuchTurn, _Mapping]] = ..., no_longer_retained: _Optional[_Union[NoLongerRetained, _Mapping]] = ..., total: _Optional[int] = ..., retained_turns: _Optional[_Iterable[int]] = ..., numbering: _Optional[_Union[TurnNumbering, str]] = ..., head_checkpoint_id: _Optional[str] = ...) -> None: ...

class Fork(_message.Message):
    __slots__ = ("from_checkpoint_id", "turn", "questions", "newest_checkpoint_id")
    FROM_CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    QUESTIONS_FIELD_NUMBER: _ClassVar[int]
    NEWEST_CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    from_checkpoint_id: str
    turn: int
    questions: int
    newest_checkpoint_id: str
    def __init__(self, from_checkpoint_id: _Optional[str] = ..., turn: _Optional[int] = ..., questions: _Optional[int] = ..., newest_checkpoint_id: _Optional[str] = ...) -> None: ...

class HistoryRewound(_message.Message):
    __slots__ = ("turn", "fork")
    TURN_FIELD_NUMBER: _ClassVar[int]
    FORK_FIELD_NUMBER: _ClassVar[int]
    turn: int
    fork: Fork
    def __init__(self, turn: _Optional[int] = ..., fork: _Optional[_Union[Fork, _Mapping]] = ...) -> None: ...

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
    __slots__ = ("thread_id", "checkpoint_ns", "include_keys_written", "channel", "head_checkpoint_id")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_NS_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_KEYS_WRITTEN_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    HEAD_CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    checkpoint_ns: str
    include_keys_written: bool
    channel: str
    head_checkpoint_id: str
    def __init__(self, thread_id: _Optional[str] = ..., checkpoint_ns: _Optional[str] = ..., include_keys_written: _Optional[bool] = ..., channel: _Optional[str] = ..., head_checkpoint_id: _Optional[str] = ...) -> None: ...

class TurnsResponse(_message.Message):
    __slots__ = ("turns", "total", "numbering", "head_checkpoint_id", "forks")
    TURNS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    NUMBERING_FIELD_NUMBER: _ClassVar[int]
    HEAD_CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    FORKS_FIELD_NUMBER: _ClassVar[int]
    turns: _containers.RepeatedCompositeFieldContainer[TurnInfo]
    total: int
    numbering: TurnNumbering
    head_checkpoint_id: str
    forks: _containers.RepeatedCompositeFieldContainer[Fork]
    def __init__(self, turns: _Optional[_Iterable[_Union[TurnInfo, _Mapping]]] = ..., total: _Optional[int] = ..., numbering: _Optional[_Union[TurnNumbering, str]] = ..., head_checkpoint_id: _Optional[str] = ..., forks: _Optional[_Iterable[_Union[Fork, _Mapping]]] = ...) -> None: ...

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

class ThreadsRequest(_message.Message):
    __slots__ = ("thread_id_prefix", "checkpoint_ns", "page_size", "page_token", "order", "last_activity_after", "last_activity_before", "include_turns")
    THREAD_ID_PREFIX_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_NS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    LAST_ACTIVITY_AFTER_FIELD_NUMBER: _ClassVar[int]
    LAST_ACTIVITY_BEFORE_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_TURNS_FIELD_NUMBER: _ClassVar[int]
    thread_id_prefix: str
    checkpoint_ns: str
    page_size: int
    page_token: str
    order: ThreadsOrder
    last_activity_after: _timestamp_pb2.Timestamp
    last_activity_before: _timestamp_pb2.Timestamp
    include_turns: bool
    def __init__(self, thread_id_prefix: _Optional[str] = ..., checkpoint_ns: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., order: _Optional[_Union[ThreadsOrder, str]] = ..., last_activity_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_activity_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., include_turns: _Optional[bool] = ...) -> None: ...

class ThreadsResponse(_message.Message):
    __slots__ = ("threads", "next_page_token")
    THREADS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    threads: _containers.RepeatedCompositeFieldContainer[ThreadInfo]
    next_page_token: str
    def __init__(self, threads: _Optional[_Iterable[_Union[ThreadInfo, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ThreadInfo(_message.Message):
    __slots__ = ("thread_id", "checkpoint_count", "first_checkpoint_at", "last_checkpoint_at", "last_checkpoint_id", "total_turns", "numbering", "error")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_COUNT_FIELD_NUMBER: _ClassVar[int]
    FIRST_CHECKPOINT_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_CHECKPOINT_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TURNS_FIELD_NUMBER: _ClassVar[int]
    NUMBERING_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    checkpoint_count: int
    first_checkpoint_at: _timestamp_pb2.Timestamp
    last_checkpoint_at: _timestamp_pb2.Timestamp
    last_checkpoint_id: str
    total_turns: int
    numbering: TurnNumbering
    error: ThreadError
    def __init__(self, thread_id: _Optional[str] = ..., checkpoint_count: _Optional[int] = ..., first_checkpoint_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_checkpoint_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_checkpoint_id: _Optional[str] = ..., total_turns: _Optional[int] = ..., numbering: _Optional[_Union[TurnNumbering, str]] = ..., error: _Optional[_Union[ThreadError, _Mapping]] = ...) -> None: ...

class ThreadError(_message.Message):
    __slots__ = ("code", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class DiffRequest(_message.Message):
    __slots__ = ("thread_id", "checkpoint_ns", "to_turn", "from_turn", "keys", "channel", "include_unchanged", "value_format", "head_checkpoint_id")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_NS_FIELD_NUMBER: _ClassVar[int]
    TO_TURN_FIELD_NUMBER: _ClassVar[int]
    FROM_TURN_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_UNCHANGED_FIELD_NUMBER: _ClassVar[int]
    VALUE_FORMAT_FIELD_NUMBER: _ClassVar[int]
    HEAD_CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    checkpoint_ns: str
    to_turn: int
    from_turn: int
    keys: _containers.RepeatedScalarFieldContainer[str]
    channel: str
    include_unchanged: bool
    value_format: ValueFormat
    head_checkpoint_id: str
    def __init__(self, thread_id: _Optional[str] = ..., checkpoint_ns: _Optional[str] = ..., to_turn: _Optional[int] = ..., from_turn: _Optional[int] = ..., keys: _Optional[_Iterable[str]] = ..., channel: _Optional[str] = ..., include_unchanged: _Optional[bool] = ..., value_format: _Optional[_Union[ValueFormat, str]] = ..., head_checkpoint_id: _Optional[str] = ...) -> None: ...

class DiffResponse(_message.Message):
    __slots__ = ("from_turn", "to_turn", "changes", "total", "retained_turns", "numbering", "head_checkpoint_id")
    FROM_TURN_FIELD_NUMBER: _ClassVar[int]
    TO_TURN_FIELD_NUMBER: _ClassVar[int]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    RETAINED_TURNS_FIELD_NUMBER: _ClassVar[int]
    NUMBERING_FIELD_NUMBER: _ClassVar[int]
    HEAD_CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    from_turn: DiffTurn
    to_turn: DiffTurn
    changes: _containers.RepeatedCompositeFieldContainer[KeyChange]
    total: int
    retained_turns: _containers.RepeatedScalarFieldContainer[int]
    numbering: TurnNumbering
    head_checkpoint_id: str
    def __init__(self, from_turn: _Optional[_Union[DiffTurn, _Mapping]] = ..., to_turn: _Optional[_Union[DiffTurn, _Mapping]] = ..., changes: _Optional[_Iterable[_Union[KeyChange, _Mapping]]] = ..., total: _Optional[int] = ..., retained_turns: _Optional[_Iterable[int]] = ..., numbering: _Optional[_Union[TurnNumbering, str]] = ..., head_checkpoint_id: _Optional[str] = ...) -> None: ...

class DiffTurn(_message.Message):
    __slots__ = ("found", "no_such_turn", "no_longer_retained")
    FOUND_FIELD_NUMBER: _ClassVar[int]
    NO_SUCH_TURN_FIELD_NUMBER: _ClassVar[int]
    NO_LONGER_RETAINED_FIELD_NUMBER: _ClassVar[int]
    found: TurnInfo
    no_such_turn: NoSuchTurn
    no_longer_retained: NoLongerRetained
    def __init__(self, found: _Optional[_Union[TurnInfo, _Mapping]] = ..., no_such_turn: _Optional[_Union[NoSuchTurn, _Mapping]] = ..., no_longer_retained: _Optional[_Union[NoLongerRetained, _Mapping]] = ...) -> None: ...

class KeyChange(_message.Message):
    __slots__ = ("key", "kind", "from_entry", "to_entry", "patch")
    KEY_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    FROM_ENTRY_FIELD_NUMBER: _ClassVar[int]
    TO_ENTRY_FIELD_NUMBER: _ClassVar[int]
    PATCH_FIELD_NUMBER: _ClassVar[int]
    key: str
    kind: KeyChangeKind
    from_entry: StateEntry
    to_entry: StateEntry
    patch: _containers.RepeatedCompositeFieldContainer[JsonPatchOperation]
    def __init__(self, key: _Optional[str] = ..., kind: _Optional[_Union[KeyChangeKind, str]] = ..., from_entry: _Optional[_Union[StateEntry, _Mapping]] = ..., to_entry: _Optional[_Union[StateEntry, _Mapping]] = ..., patch: _Optional[_Iterable[_Union[JsonPatchOperation, _Mapping]]] = ...) -> None: ...

class JsonPatchOperation(_message.Message):
    __slots__ = ("op", "path", "value", "value_json")
    OP_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    VALUE_JSON_FIELD_NUMBER: _ClassVar[int]
    op: str
    path: str
    value: _struct_pb2.Value
    value_json: bytes
    def __init__(self, op: _Optional[str] = ..., path: _Optional[str] = ..., value: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., value_json: _Optional[bytes] = ...) -> None: ...

class WatchTurnsRequest(_message.Message):
    __slots__ = ("thread_id", "checkpoint_ns", "after_turn", "keys", "channel", "checkpoints", "value_format", "head_checkpoint_id")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_NS_FIELD_NUMBER: _ClassVar[int]
    AFTER_TURN_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINTS_FIELD_NUMBER: _ClassVar[int]
    VALUE_FORMAT_FIELD_NUMBER: _ClassVar[int]
    HEAD_CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    checkpoint_ns: str
    after_turn: int
    keys: _containers.RepeatedScalarFieldContainer[str]
    channel: str
    checkpoints: bool
    value_format: ValueFormat
    head_checkpoint_id: str
    def __init__(self, thread_id: _Optional[str] = ..., checkpoint_ns: _Optional[str] = ..., after_turn: _Optional[int] = ..., keys: _Optional[_Iterable[str]] = ..., channel: _Optional[str] = ..., checkpoints: _Optional[bool] = ..., value_format: _Optional[_Union[ValueFormat, str]] = ..., head_checkpoint_id: _Optional[str] = ...) -> None: ...

class WatchTurnsResponse(_message.Message):
    __slots__ = ("turn_ended", "checkpoint", "history_rewound", "total", "numbering", "head_checkpoint_id")
    TURN_ENDED_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    HISTORY_REWOUND_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    NUMBERING_FIELD_NUMBER: _ClassVar[int]
    HEAD_CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    turn_ended: TurnState
    checkpoint: TurnState
    history_rewound: HistoryRewound
    total: int
    numbering: TurnNumbering
    head_checkpoint_id: str
    def __init__(self, turn_ended: _Optional[_Union[TurnState, _Mapping]] = ..., checkpoint: _Optional[_Union[TurnState, _Mapping]] = ..., history_rewound: _Optional[_Union[HistoryRewound, _Mapping]] = ..., total: _Optional[int] = ..., numbering: _Optional[_Union[TurnNumbering, str]] = ..., head_checkpoint_id: _Optional[str] = ...) -> None: ...
