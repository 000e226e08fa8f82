"""A manager's configuration: the keywords of :class:`~redlock.Redlock`, checked for type
and turned into C arguments (:func:`check`), then set on a ``redlock_config`` from which the
manager is made (:func:`new_manager`). Their values are checked by the library, whose
message is raised as is."""

from __future__ import annotations

import ctypes
import os
from typing import Any, List, NamedTuple, Optional, Tuple, Union

from . import _core, _ffi
from ._args import _u32
from ._core import _check
from ._errors import InvalidArgument

#: A file path, as ``open`` takes one.
PathArg = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]

# Defaults documented in include/redlock.h, used only when one of a pair of options that C
# sets together (retry count and delay; connect and node timeouts) is given without the other.
_DEFAULT_RETRY_COUNT = 3
_DEFAULT_RETRY_DELAY_MS = 200
_DEFAULT_CONNECT_TIMEOUT_MS = 250


def _label(label: object) -> Optional[bytes]:
    """A holder label as NUL-terminated-safe UTF-8 (``None``: no label). Its length and
    characters are checked by the library; a NUL is refused here, as C would cut the string
    short at it."""
    if label is None:
        return None
    if not isinstance(label, str):
        raise TypeError(f"label must be a str, not {type(label).__name__}")
    if "\0" in label:
        raise InvalidArgument("label must not contain control characters (a NUL found)")
    try:
        return label.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidArgument(f"label is not encodable as UTF-8: {e}") from None


def _key_prefix(prefix: object) -> Optional[bytes]:
    """A key prefix as bytes (``None``: the default, ``redlock:``); its length is checked by
    the library."""
    if prefix is None:
        return None
    if isinstance(prefix, str):
        try:
            return prefix.encode("utf-8")
        except UnicodeEncodeError as e:
            raise InvalidArgument(f"key_prefix is not encodable as UTF-8: {e}") from None
    if isinstance(prefix, (bytes, bytearray)):
        return bytes(prefix)
    raise TypeError(f"key_prefix must be str or bytes, not {type(prefix).__name__}")


def _path(name: str, value: object) -> Optional[bytes]:
    """A file path (``str``, ``bytes`` or ``os.PathLike``) as the bytes of its name, for C
    (``None`` stays ``None``)."""
    if value is None:
        return None
    if not isinstance(value, (str, bytes, os.PathLike)):
        raise TypeError(
            f"{name} must be a path (str, bytes or os.PathLike), not {type(value).__name__}"
        )
    b = os.fsencode(value)
    if b"\0" in b:
        raise InvalidArgument(f"{name} must not contain a NUL character")
    if not b:
        raise InvalidArgument(f"{name} must not be empty")
    return b


def _tls_options(
    ca_file: object, client_cert: object, client_key: object, server_name: object, skip: object
) -> Tuple[Optional[bytes], Optional[Tuple[bytes, bytes]], Optional[bytes], bool]:
    """The TLS keywords of :class:`Redlock`, checked for type and turned into C arguments."""
    ca = _path("tls_ca_file", ca_file)
    cert = _path("tls_client_cert", client_cert)
    key = _path("tls_client_key", client_key)
    if (cert is None) != (key is None):
        raise InvalidArgument(
            "tls_client_cert and tls_client_key go together: give both or neither"
        )
    name: Optional[bytes] = None
    if server_name is not None:
        if not isinstance(server_name, str):
            raise TypeError(f"tls_server_name must be a str, not {type(server_name).__name__}")
        if "\0" in server_name:
            raise InvalidArgument("tls_server_name must not contain a NUL character")
        name = server_name.encode("utf-8", "surrogatepass")
    if type(skip) is not bool:
        raise TypeError(f"tls_insecure_skip_verify must be a bool, not {type(skip).__name__}")
    pair = None if cert is None or key is None else (cert, key)
    return ca, pair, name, skip


def _url(url: object) -> bytes:
    if not isinstance(url, str):
        raise TypeError(f"each node must be a str URL, not {type(url).__name__}")
    if "\0" in url:
        raise InvalidArgument("a node URL must not contain a NUL character")
    try:
        return url.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidArgument(f"a node URL is not encodable as UTF-8: {e}") from None


class Config(NamedTuple):
    """The checked keywords of :class:`~redlock.Redlock`, as C takes them (``None``: left
    at the library's default)."""

    urls: List[bytes]
    retry: Optional[Tuple[int, int]]
    drift: Optional[float]
    timeouts: Optional[Tuple[int, int]]
    max_ttl: Optional[int]
    restart_quarantine: bool
    label: Optional[bytes]
    prefix: Optional[bytes]
    tls_ca: Optional[bytes]
    tls_pair: Optional[Tuple[bytes, bytes]]
    tls_name: Optional[bytes]
    tls_skip: bool
    #: The sentinels' (user, password): user ``None`` for the default user.
    sentinel_auth: Optional[Tuple[Optional[bytes], bytes]] = None
    #: (replicas, timeout in ms) a failover group's grants must be acknowledged by.
    replica_acks: Optional[Tuple[int, int]] = None


def _nodes(nodes: object) -> List[bytes]:
    if isinstance(nodes, (str, bytes)):
        raise TypeError("nodes must be a list of URLs, not a single string")
    try:
        node_list = list(nodes)  # type: ignore[call-overload]
    except TypeError:
        raise TypeError(f"nodes must be a list of str URLs, not {type(nodes).__name__}") from None
    return [_url(u) for u in node_list]


def _pair(name_a: str, a: object, default_a: int, name_b: str, b: object, default_b: int) -> Any:
    """Two options C sets together: ``None`` when neither is given, else both as ``uint32_t``
    (the one not given at its default)."""
    if a is None and b is None:
        return None
    return (
        _u32(name_a, default_a if a is None else a),
        _u32(name_b, default_b if b is None else b),
    )


def _text(name: str, value: object) -> bytes:
    """A string C takes NUL-terminated, as UTF-8."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    if "\0" in value:
        raise InvalidArgument(f"{name} must not contain a NUL character")
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidArgument(f"{name} is not encodable as UTF-8: {e}") from None


def groups(
    sentinel_username: object,
    sentinel_password: object,
    replica_acks: object,
    replica_ack_timeout_ms: object,
) -> Tuple[Optional[Tuple[Optional[bytes], bytes]], Optional[Tuple[int, int]]]:
    """The failover groups' keywords of :class:`~redlock.Redlock`, checked for type and
    converted: the sentinels' credentials, and the replica acknowledgement (replicas, timeout
    ms; either alone takes 1 replica or 100 ms). The library checks their values."""
    auth = None
    if sentinel_password is not None:
        user = None if sentinel_username is None else _text("sentinel_username", sentinel_username)
        auth = (user, _text("sentinel_password", sentinel_password))
    elif sentinel_username is not None:
        raise TypeError("sentinel_username needs sentinel_password")
    acks = _pair("replica_acks", replica_acks, 1, "replica_ack_timeout_ms", replica_ack_timeout_ms, 100)
    return auth, acks


def check(
    nodes: object,
    retry_count: object,
    retry_delay_ms: object,
    drift_factor: object,
    connect_timeout_ms: object,
    node_timeout_ms: object,
    max_ttl_ms: object,
    restart_quarantine: object,
    label: object,
    key_prefix: object,
    tls: Tuple[object, object, object, object, object],
) -> Config:
    """The keywords of :class:`~redlock.Redlock` (``tls``: its five ``tls_`` keywords, in
    order), checked for type and converted; the library checks their values."""
    urls = _nodes(nodes)
    retry = _pair(
        "retry_count", retry_count, _DEFAULT_RETRY_COUNT,
        "retry_delay_ms", retry_delay_ms, _DEFAULT_RETRY_DELAY_MS,
    )  # fmt: skip
    drift: Optional[float] = None
    if drift_factor is not None:
        if isinstance(drift_factor, bool) or not isinstance(drift_factor, (int, float)):
            raise TypeError(f"drift_factor must be a float, not {type(drift_factor).__name__}")
        drift = float(drift_factor)  # its range (finite, in [0, 1)) is the library's to check
    timeouts = _pair(
        "connect_timeout_ms", connect_timeout_ms, _DEFAULT_CONNECT_TIMEOUT_MS,
        "node_timeout_ms", node_timeout_ms, 0,
    )  # fmt: skip
    max_ttl = None if max_ttl_ms is None else _u32("max_ttl_ms", max_ttl_ms)
    if type(restart_quarantine) is not bool:
        raise TypeError(
            f"restart_quarantine must be a bool, not {type(restart_quarantine).__name__}"
        )
    label_b = _label(label)
    prefix = _key_prefix(key_prefix)
    tls_ca, tls_pair, tls_name, tls_skip = _tls_options(*tls)
    return Config(
        urls, retry, drift, timeouts, max_ttl, restart_quarantine, label_b, prefix, tls_ca,
        tls_pair, tls_name, tls_skip,
    )  # fmt: skip


def _configure(c: Any, cfg: Any, conf: Config, err: Any) -> None:
    """Sets ``conf`` on the C config ``cfg``; raises the library's error for a value it
    refuses."""
    n = _ffi.ERR_LEN
    for url in conf.urls:
        _check(c.redlock_config_add_node(cfg, url, err, n), err)
    if conf.retry is not None:
        _check(c.redlock_config_set_retry(cfg, conf.retry[0], conf.retry[1], err, n), err)
    if conf.drift is not None:
        _check(c.redlock_config_set_drift_factor(cfg, conf.drift, err, n), err)
    if conf.timeouts is not None:
        t = conf.timeouts
        _check(c.redlock_config_set_timeouts(cfg, t[0], t[1], err, n), err)
    if conf.max_ttl is not None:
        _check(c.redlock_config_set_max_ttl(cfg, conf.max_ttl, err, n), err)
    _check(c.redlock_config_set_restart_quarantine(cfg, conf.restart_quarantine, err, n), err)
    # Both are options of this manager's own config: nothing cached in this binding (the
    # acquisition options are per manager) carries them to another manager.
    if conf.label:
        _check(c.redlock_config_set_label(cfg, conf.label, err, n), err)
    prefix = conf.prefix
    if prefix is not None:
        _check(c.redlock_config_set_key_prefix(cfg, prefix, len(prefix), err, n), err)
    if conf.tls_ca is not None:
        _check(c.redlock_config_set_tls_ca_file(cfg, conf.tls_ca, err, n), err)
    if conf.tls_pair is not None:
        cert, key = conf.tls_pair
        _check(c.redlock_config_set_tls_client_cert(cfg, cert, key, err, n), err)
    if conf.tls_name is not None:
        _check(c.redlock_config_set_tls_server_name(cfg, conf.tls_name, err, n), err)
    if conf.tls_skip:
        _check(c.redlock_config_set_tls_insecure_skip_verify(cfg, True, err, n), err)
    if conf.sentinel_auth is not None:
        user, pw = conf.sentinel_auth
        _check(c.redlock_config_set_sentinel_auth(cfg, user, pw, err, n), err)
    if conf.replica_acks is not None:
        r, t = conf.replica_acks
        _check(c.redlock_config_set_replica_acks(cfg, r, t, err, n), err)


def new_manager(conf: Config) -> Any:
    """A new C manager (``redlock_manager_new``) of the checked configuration ``conf``."""
    c = _core.load()
    cfg = c.redlock_config_new()
    if not cfg:
        raise MemoryError("redlock_config_new returned NULL")
    try:
        err = _ffi.err_buffer()
        _configure(c, cfg, conf, err)
        out = _ffi.ManagerPtr()
        _check(c.redlock_manager_new(cfg, ctypes.byref(out), err, _ffi.ERR_LEN), err)
    finally:
        c.redlock_config_free(cfg)
    return out
