"""A manager's configuration: checks of the keywords of :class:`~redlock.Redlock` that turn
them into C arguments."""

from __future__ import annotations

import os
from typing import Optional, Tuple, Union

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

