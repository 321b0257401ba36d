from journal.wire import journal_pb2 as _journal_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ContentPackage(_message.Message):
    __slots__ = ("package_id", "req_type", "roots", "nodes", "created_ms", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PACKAGE_ID_FIELD_NUMBER: _ClassVar[int]
    REQ_TYPE_FIELD_NUMBER: _ClassVar[int]
    ROOTS_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    CREATED_MS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    package_id: str
    req_type: _journal_pb2.ReqType
    roots: _containers.RepeatedCompositeFieldContainer[FilterRoot]
    nodes: _containers.RepeatedCompositeFieldContainer[Node]
    created_ms: int
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, package_id: _Optional[str] = ..., req_type: _Optional[_Union[_journal_pb2.ReqType, str]] = ..., roots: _Optional[_Iterable[_Union[FilterRoot, _Mapping]]] = ..., nodes: _Optional[_Iterable[_Union[Node, _Mapping]]] = ..., created_ms: _Optional[int] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class FilterRoot(_message.Message):
    __slots__ = ("path", "deep")
    PATH_FIELD_NUMBER: _ClassVar[int]
    DEEP_FIELD_NUMBER: _ClassVar[int]
    path: str
    deep: bool
    def __init__(self, path: _Optional[str] = ..., deep: _Optional[bool] = ...) -> None: ...

class Node(_message.Message):
    __slots__ = ("path", "properties")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...
    PATH_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    path: str
    properties: _containers.MessageMap[str, Value]
    def __init__(self, path: _Optional[str] = ..., properties: _Optional[_Mapping[str, Value]] = ...) -> None: ...

class Value(_message.Message):
    __slots__ = ("string_value", "long_value", "double_value", "bool_value", "date_ms", "multi_value", "binary_value")
    STRING_VALUE_FIELD_NUMBER: _ClassVar[int]
    LONG_VALUE_FIELD_NUMBER: _ClassVar[int]
    DOUBLE_VALUE_FIELD_NUMBER: _ClassVar[int]
    BOOL_VALUE_FIELD_NUMBER: _ClassVar[int]
    DATE_MS_FIELD_NUMBER: _ClassVar[int]
    MULTI_VALUE_FIELD_NUMBER: _ClassVar[int]
    BINARY_VALUE_FIELD_NUMBER: _ClassVar[int]
    string_value: str
    long_value: int
    double_value: float
    bool_value: bool
    date_ms: int
    multi_value: MultiValue
    binary_value: Binary
    def __init__(self, string_value: _Optional[str] = ..., long_value: _Optional[int] = ..., double_value: _Optional[float] = ..., bool_value: _Optional[bool] = ..., date_ms: _Optional[int] = ..., multi_value: _Optional[_Union[MultiValue, _Mapping]] = ..., binary_value: _Optional[_Union[Binary, _Mapping]] = ...) -> None: ...

class MultiValue(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedCompositeFieldContainer[Value]
    def __init__(self, values: _Optional[_Iterable[_Union[Value, _Mapping]]] = ...) -> None: ...

class Binary(_message.Message):
    __slots__ = ("inline", "ref", "content_type")
    INLINE_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    CONTENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    inline: bytes
    ref: BlobRef
    content_type: str
    def __init__(self, inline: _Optional[bytes] = ..., ref: _Optional[_Union[BlobRef, _Mapping]] = ..., content_type: _Optional[str] = ...) -> None: ...

class BlobRef(_message.Message):
    __slots__ = ("key", "size", "sha256", "content_type")
    KEY_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    CONTENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    key: str
    size: int
    sha256: str
    content_type: str
    def __init__(self, key: _Optional[str] = ..., size: _Optional[int] = ..., sha256: _Optional[str] = ..., content_type: _Optional[str] = ...) -> None: ...
