from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ReqType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ADD: _ClassVar[ReqType]
    DELETE: _ClassVar[ReqType]
    TEST: _ClassVar[ReqType]
    INVALIDATE: _ClassVar[ReqType]

class Status(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REMOVED_FAILED: _ClassVar[Status]
    REMOVED: _ClassVar[Status]
    IMPORTED: _ClassVar[Status]
ADD: ReqType
DELETE: ReqType
TEST: ReqType
INVALIDATE: ReqType
REMOVED_FAILED: Status
REMOVED: Status
IMPORTED: Status

class PackageMessage(_message.Message):
    __slots__ = ("pub_sling_id", "pub_agent_name", "pkg_id", "req_type", "pkg_length", "pkg_binary", "paths", "deep_paths", "pkg_binary_ref", "pkg_type", "user_id", "metadata", "created_ms", "checksum", "sequence")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PUB_SLING_ID_FIELD_NUMBER: _ClassVar[int]
    PUB_AGENT_NAME_FIELD_NUMBER: _ClassVar[int]
    PKG_ID_FIELD_NUMBER: _ClassVar[int]
    REQ_TYPE_FIELD_NUMBER: _ClassVar[int]
    PKG_LENGTH_FIELD_NUMBER: _ClassVar[int]
    PKG_BINARY_FIELD_NUMBER: _ClassVar[int]
    PATHS_FIELD_NUMBER: _ClassVar[int]
    DEEP_PATHS_FIELD_NUMBER: _ClassVar[int]
    PKG_BINARY_REF_FIELD_NUMBER: _ClassVar[int]
    PKG_TYPE_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    CREATED_MS_FIELD_NUMBER: _ClassVar[int]
    CHECKSUM_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    pub_sling_id: str
    pub_agent_name: str
    pkg_id: str
    req_type: ReqType
    pkg_length: int
    pkg_binary: bytes
    paths: _containers.RepeatedScalarFieldContainer[str]
    deep_paths: _containers.RepeatedScalarFieldContainer[str]
    pkg_binary_ref: str
    pkg_type: str
    user_id: str
    metadata: _containers.ScalarMap[str, str]
    created_ms: int
    checksum: str
    sequence: int
    def __init__(self, pub_sling_id: _Optional[str] = ..., pub_agent_name: _Optional[str] = ..., pkg_id: _Optional[str] = ..., req_type: _Optional[_Union[ReqType, str]] = ..., pkg_length: _Optional[int] = ..., pkg_binary: _Optional[bytes] = ..., paths: _Optional[_Iterable[str]] = ..., deep_paths: _Optional[_Iterable[str]] = ..., pkg_binary_ref: _Optional[str] = ..., pkg_type: _Optional[str] = ..., user_id: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., created_ms: _Optional[int] = ..., checksum: _Optional[str] = ..., sequence: _Optional[int] = ...) -> None: ...

class PackageStatusMessage(_message.Message):
    __slots__ = ("sub_sling_id", "sub_agent_name", "pub_agent_name", "offset", "status", "sequence")
    SUB_SLING_ID_FIELD_NUMBER: _ClassVar[int]
    SUB_AGENT_NAME_FIELD_NUMBER: _ClassVar[int]
    PUB_AGENT_NAME_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    sub_sling_id: str
    sub_agent_name: str
    pub_agent_name: str
    offset: int
    status: Status
    sequence: int
    def __init__(self, sub_sling_id: _Optional[str] = ..., sub_agent_name: _Optional[str] = ..., pub_agent_name: _Optional[str] = ..., offset: _Optional[int] = ..., status: _Optional[_Union[Status, str]] = ..., sequence: _Optional[int] = ...) -> None: ...

class SubscriberState(_message.Message):
    __slots__ = ("pub_agent_name", "offset", "retries", "sequence")
    PUB_AGENT_NAME_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    RETRIES_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    pub_agent_name: str
    offset: int
    retries: int
    sequence: int
    def __init__(self, pub_agent_name: _Optional[str] = ..., offset: _Optional[int] = ..., retries: _Optional[int] = ..., sequence: _Optional[int] = ...) -> None: ...

class SubscriberConfiguration(_message.Message):
    __slots__ = ("editable", "max_retries")
    EDITABLE_FIELD_NUMBER: _ClassVar[int]
    MAX_RETRIES_FIELD_NUMBER: _ClassVar[int]
    editable: bool
    max_retries: int
    def __init__(self, editable: _Optional[bool] = ..., max_retries: _Optional[int] = ...) -> None: ...

class DiscoveryMessage(_message.Message):
    __slots__ = ("sub_sling_id", "sub_agent_name", "subscriber_state", "subscriber_configuration", "paused", "canary_pending", "canary_failed")
    SUB_SLING_ID_FIELD_NUMBER: _ClassVar[int]
    SUB_AGENT_NAME_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBER_STATE_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBER_CONFIGURATION_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    CANARY_PENDING_FIELD_NUMBER: _ClassVar[int]
    CANARY_FAILED_FIELD_NUMBER: _ClassVar[int]
    sub_sling_id: str
    sub_agent_name: str
    subscriber_state: _containers.RepeatedCompositeFieldContainer[SubscriberState]
    subscriber_configuration: SubscriberConfiguration
    paused: bool
    canary_pending: _containers.RepeatedScalarFieldContainer[str]
    canary_failed: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, sub_sling_id: _Optional[str] = ..., sub_agent_name: _Optional[str] = ..., subscriber_state: _Optional[_Iterable[_Union[SubscriberState, _Mapping]]] = ..., subscriber_configuration: _Optional[_Union[SubscriberConfiguration, _Mapping]] = ..., paused: _Optional[bool] = ..., canary_pending: _Optional[_Iterable[str]] = ..., canary_failed: _Optional[_Iterable[str]] = ...) -> None: ...

class ClearCommand(_message.Message):
    __slots__ = ("offset", "sequence")
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    offset: int
    sequence: int
    def __init__(self, offset: _Optional[int] = ..., sequence: _Optional[int] = ...) -> None: ...

class PauseCommand(_message.Message):
    __slots__ = ("paused",)
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    paused: bool
    def __init__(self, paused: _Optional[bool] = ...) -> None: ...

class CommandMessage(_message.Message):
    __slots__ = ("sub_sling_id", "sub_agent_name", "clear_command", "pub_agent_name", "sequence", "pause_command")
    SUB_SLING_ID_FIELD_NUMBER: _ClassVar[int]
    SUB_AGENT_NAME_FIELD_NUMBER: _ClassVar[int]
    CLEAR_COMMAND_FIELD_NUMBER: _ClassVar[int]
    PUB_AGENT_NAME_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    PAUSE_COMMAND_FIELD_NUMBER: _ClassVar[int]
    sub_sling_id: str
    sub_agent_name: str
    clear_command: ClearCommand
    pub_agent_name: str
    sequence: int
    pause_command: PauseCommand
    def __init__(self, sub_sling_id: _Optional[str] = ..., sub_agent_name: _Optional[str] = ..., clear_command: _Optional[_Union[ClearCommand, _Mapping]] = ..., pub_agent_name: _Optional[str] = ..., sequence: _Optional[int] = ..., pause_command: _Optional[_Union[PauseCommand, _Mapping]] = ...) -> None: ...

class PingMessage(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class LogMessage(_message.Message):
    __slots__ = ("pub_agent_name", "sub_sling_id", "sub_agent_name", "message", "stacktrace", "offset", "pkg_id", "sequence")
    PUB_AGENT_NAME_FIELD_NUMBER: _ClassVar[int]
    SUB_SLING_ID_FIELD_NUMBER: _ClassVar[int]
    SUB_AGENT_NAME_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    STACKTRACE_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    PKG_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    pub_agent_name: str
    sub_sling_id: str
    sub_agent_name: str
    message: str
    stacktrace: str
    offset: int
    pkg_id: str
    sequence: int
    def __init__(self, pub_agent_name: _Optional[str] = ..., sub_sling_id: _Optional[str] = ..., sub_agent_name: _Optional[str] = ..., message: _Optional[str] = ..., stacktrace: _Optional[str] = ..., offset: _Optional[int] = ..., pkg_id: _Optional[str] = ..., sequence: _Optional[int] = ...) -> None: ...
