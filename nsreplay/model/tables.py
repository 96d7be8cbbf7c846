"""Value types of the reference model, and the canonical :class:`Snapshot` of one NameServer.

Every value here is immutable (frozen dataclasses, :class:`FrozenDict`, ``frozenset``, ``tuple``) and
compares with ``==``; a ``FrozenDict`` is equal to a plain ``dict`` with the same items.

Canonical snapshot form (what every rebuild of the route tables is compared against)
------------------------------------------------------------------------------------

``Snapshot`` holds the five route tables of one NameServer at one instant, keyed and valued exactly as
the semantics spec §1 describes:

==================== ========================================= =========================================
table                key                                       value
==================== ========================================= =========================================
``topicQueueTable``   topic                                     ``{brokerName: QueueData}``
``brokerAddrTable``   brokerName                                ``BrokerData`` (``brokerAddrs`` = ``{id: addr}``)
``clusterAddrTable``  clusterName                               ``frozenset`` of brokerNames
``brokerLiveTable``   ``LiveKey``                               ``BrokerLiveInfo``
``filterServerTable`` ``LiveKey``                               ``tuple`` of filter-server addresses (as sent)
==================== ========================================= =========================================

``LiveKey`` is the broker address (``"10.0.0.1:10911"``) in the ``rocketmq-4.9`` profile and the pair
``(clusterName, brokerAddr)`` in the ``rocketmq-5`` profile.

Profile-specific fields, fixed so that both profiles share one form:

* ``BrokerData.enableActingMaster`` / ``zoneName`` exist only in 5.x; in a 4.9 snapshot they are always
  ``False`` / ``None``.
* ``BrokerLiveInfo.heartbeatTimeoutMillis`` is the timeout the scan applies: always 120000 in 4.9
  (fixed), the header value or 120000 in 5.x.
* ``DataVersion.stateVersion`` does not exist in 4.9 and is always 0 there.
* ``BrokerLiveInfo.conn`` is the capture's connection id of the request that created the entry
  (the Java ``channel``).

Besides the five tables a snapshot carries ``orderTopicConf`` (the ORDER_TOPIC_CONFIG namespace of the
KV store: topic -> "brokerName:queueNum;..."), and, for rendering answers, the ``profile`` and the
NameServer ``config`` (``config`` does not take part in ``==``). ``Snapshot.to_plain()`` gives the five
tables as builtin Python values only (see its docstring).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Mapping, TypeVar, Union

from nsreplay.protocol.java_numbers import fits_java, is_java_integer_text, parse_java_integer

__all__ = [
    "PROFILE_49",
    "PROFILE_5",
    "PROFILES",
    "Profile",
    "LiveKey",
    "Cause",
    "ResponseCode",
    "FrozenDict",
    "DataVersion",
    "QueueData",
    "BrokerData",
    "BrokerLiveInfo",
    "NamesrvConfig",
    "Removal",
    "Outcome",
    "Snapshot",
]

Profile = Literal["rocketmq-4.9", "rocketmq-5"]
PROFILE_49: Profile = "rocketmq-4.9"
PROFILE_5: Profile = "rocketmq-5"
PROFILES: tuple[Profile, ...] = (PROFILE_49, PROFILE_5)

LiveKey = Union[str, tuple[str, str]]
"""Key of brokerLiveTable / filterServerTable: ``brokerAddr`` (4.9) or ``(clusterName, brokerAddr)`` (5.x)."""

Cause = Literal[
    "registered",  # REGISTER_BROKER
    "heartbeat",  # BROKER_HEARTBEAT, QUERY_DATA_VERSION
    "expired",  # the scan tick's 120 s rule
    "unregistered",  # UNREGISTER_BROKER
    "channel_closed",  # channel CLOSE, IDLE or EXCEPTION
    "namesrv_restart",  # namesrv_start: every table emptied
    "admin",  # WIPE/ADD write perm, DELETE/REGISTER topic, KV config
    "none",  # read-only requests, responses, CONNECT, unknown codes
]


class ResponseCode:
    """Remoting response codes used by the model (semantics spec §8)."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    QUERY_NOT_FOUND = 22


_K = TypeVar("_K")
_V = TypeVar("_V")


class FrozenDict(dict[_K, _V]):
    """A ``dict`` that cannot be changed after construction; hashable when its values are."""

    __slots__ = ()

    def _immutable(self, *args: object, **kwargs: object) -> None:
        raise TypeError("FrozenDict is immutable")

    __setitem__ = _immutable  # type: ignore[assignment]
    __delitem__ = _immutable  # type: ignore[assignment]
    __ior__ = _immutable  # type: ignore[assignment]
    clear = _immutable  # type: ignore[assignment]
    pop = _immutable  # type: ignore[assignment]
    popitem = _immutable  # type: ignore[assignment]
    setdefault = _immutable  # type: ignore[assignment]
    update = _immutable  # type: ignore[assignment]

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset(self.items()))

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (dict(self),))

    def __repr__(self) -> str:
        return f"FrozenDict({dict.__repr__(self)})"


@dataclass(frozen=True)
class DataVersion:
    """A broker's DataVersion {stateVersion (5.x only; 0 in 4.9), timestamp, counter}."""

    stateVersion: int
    timestamp: int
    counter: int

    def same_as(self, other: DataVersion | None, profile: Profile) -> bool:
        """Java ``DataVersion.equals``: timestamp and counter (4.9), plus stateVersion (5.x)."""
        if other is None:
            return False
        same = self.timestamp == other.timestamp and self.counter == other.counter
        return same and (profile == PROFILE_49 or self.stateVersion == other.stateVersion)


@dataclass(frozen=True)
class QueueData:
    """One brokerName's queues of one topic."""

    brokerName: str
    readQueueNums: int
    writeQueueNums: int
    perm: int
    topicSysFlag: int


@dataclass(frozen=True)
class BrokerData:
    """One broker group. ``cluster`` is fixed at creation; the last two fields are 5.x only."""

    cluster: str
    brokerName: str
    brokerAddrs: FrozenDict[int, str]
    enableActingMaster: bool = False
    zoneName: str | None = None


@dataclass(frozen=True)
class BrokerLiveInfo:
    """A live-table entry; ``conn`` is the connection id that carried the latest REGISTER_BROKER."""

    lastUpdateTimestamp: int
    heartbeatTimeoutMillis: int
    dataVersion: DataVersion
    conn: str | None
    haServerAddr: str | None


def _parse_java_bool(value: object) -> bool:
    """``Boolean.parseBoolean(String.valueOf(value))``: only "true" (any case) is true."""
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() == "true"


def _parse_java_long(name: str, value: object) -> int:
    """A numeric config value: an int, or text of ASCII digits (one optional sign, spaces around it
    ignored) that ``Long.parseLong`` reads, leading zeros and all. ValueError otherwise, as the
    NameServer would not start."""
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    if isinstance(value, bool):
        raise ValueError(f"config {name} must be an integer, got {shown}")
    if isinstance(value, int):
        number: int | None = value if fits_java(value, 64) else None
    else:
        text = str(value).strip()
        if not text.isascii() or not is_java_integer_text(text):
            raise ValueError(f"config {name} must be an integer, got {shown}")
        number = parse_java_integer(text, 64)
    if number is None:  # Long.parseLong fails: the NameServer would not start
        raise ValueError(f"config {name} is out of range of a Java long, got {shown}")
    return number


@dataclass(frozen=True)
class NamesrvConfig:
    """The NameServer settings the route tables depend on (semantics spec §9 defaults)."""

    scanNotActiveBrokerInterval: int = 5000
    deleteTopicWithBrokerRegistration: bool = False
    supportActingMaster: bool = False
    orderMessageEnable: bool = False

    @classmethod
    def from_mapping(cls, config: Mapping[str, object] | None) -> NamesrvConfig:
        """Read the known keys of a start record's ``config`` (strings like "true"/"5000" or JSON
        values); unknown keys are ignored. Raises ValueError for a value Java would refuse."""
        config = config or {}
        values: dict[str, Any] = {}
        if "scanNotActiveBrokerInterval" in config:
            interval = _parse_java_long("scanNotActiveBrokerInterval", config["scanNotActiveBrokerInterval"])
            if interval <= 0:
                raise ValueError("config scanNotActiveBrokerInterval must be positive")
            values["scanNotActiveBrokerInterval"] = interval
        for name in ("deleteTopicWithBrokerRegistration", "supportActingMaster", "orderMessageEnable"):
            if name in config:
                values[name] = _parse_java_bool(config[name])
        return cls(**values)


@dataclass(frozen=True)
class Removal:
    """One broker address taken out of the route tables, and why.

    ``brokerName``/``brokerIds`` name the group and ids the address was removed from (``None``/``()``
    when no BrokerData held it); ``groupRemoved`` means the group became empty and was dropped with its
    QueueData; ``liveRemoved`` means a live entry was removed.
    """

    ts: int
    cause: Cause
    clusterName: str | None
    brokerAddr: str
    brokerName: str | None
    brokerIds: tuple[int, ...]
    groupRemoved: bool
    liveRemoved: bool


@dataclass(frozen=True)
class Outcome:
    """What applying one record did: the NameServer's response code and remark (``SUCCESS``/``None``
    for things that are not requests), whether any route table or orderTopicConf changed (not the
    profile or config: :meth:`NameServer.apply`), the cause to log the change under, and the broker
    removals it made."""

    code: int
    remark: str | None
    changed: bool
    cause: Cause
    removals: tuple[Removal, ...] = ()


@dataclass(frozen=True)
class Snapshot:
    """The five route tables of one NameServer at one instant (canonical form: module docstring)."""

    profile: Profile
    topicQueueTable: FrozenDict[str, FrozenDict[str, QueueData]]
    brokerAddrTable: FrozenDict[str, BrokerData]
    clusterAddrTable: FrozenDict[str, frozenset[str]]
    brokerLiveTable: FrozenDict[LiveKey, BrokerLiveInfo]
    filterServerTable: FrozenDict[LiveKey, tuple[str, ...]]
    orderTopicConf: FrozenDict[str, str] = field(default_factory=FrozenDict)
    config: NamesrvConfig = field(default_factory=NamesrvConfig, compare=False)

    def tables(self) -> dict[str, Mapping[Any, Any]]:
        """The five tables by name (values as in the canonical form)."""
        return {
            "topicQueueTable": self.topicQueueTable,
            "brokerAddrTable": self.brokerAddrTable,
            "clusterAddrTable": self.clusterAddrTable,
            "brokerLiveTable": self.brokerLiveTable,
            "filterServerTable": self.filterServerTable,
        }

    def to_plain(self) -> dict[str, dict[Any, Any]]:
        """The five tables with builtin values only: dataclasses become dicts with their field names
        (``BrokerData.brokerAddrs`` a ``{int: str}`` dict, ``BrokerLiveInfo.dataVersion`` a dict),
        cluster sets stay ``frozenset``, filter lists stay ``tuple``, keys are unchanged."""
        return {
            "topicQueueTable": {
                topic: {name: asdict(qd) for name, qd in by_name.items()}
                for topic, by_name in self.topicQueueTable.items()
            },
            "brokerAddrTable": {
                name: {**asdict(bd), "brokerAddrs": dict(bd.brokerAddrs)} for name, bd in self.brokerAddrTable.items()
            },
            "clusterAddrTable": dict(self.clusterAddrTable),
            "brokerLiveTable": {key: asdict(info) for key, info in self.brokerLiveTable.items()},
            "filterServerTable": dict(self.filterServerTable),
        }
