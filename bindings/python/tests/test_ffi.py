"""The declaration table (redlock/_ffi.py) against include/redlock.h: names, arities, types,
enums, constants and versions. A drift in the C ABI fails here, loudly."""

from __future__ import annotations

import ctypes
import os
import re
from ctypes import POINTER, c_bool, c_char, c_char_p, c_double, c_int, c_int32, c_size_t, c_uint8
from ctypes import c_uint32, c_uint64, c_void_p
from typing import Dict, List, Tuple

import pytest

import redlock
from redlock import _errors, _ffi

from conftest import PACKAGE_ROOT, REPO_ROOT

HEADER = os.path.join(REPO_ROOT, "include", "redlock.h")


def _header_text() -> str:
    with open(HEADER, encoding="utf-8") as f:
        return f.read()


def _strip(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def _norm(c_type: str) -> str:
    c_type = re.sub(r"\s+", " ", c_type).strip()
    c_type = re.sub(r"\s*\*", " *", c_type)
    return c_type.replace("* *", "**")


def header_functions() -> Dict[str, Tuple[str, List[str]]]:
    """``name -> (return type, [parameter types])`` for every ``redlock_*`` function."""
    body = _strip(_header_text())
    functions: Dict[str, Tuple[str, List[str]]] = {}
    pattern = re.compile(r"([A-Za-z_][\w\s\*]*?)\b(redlock_\w+)\s*\(([^;{}]*?)\)\s*;", re.S)
    for m in pattern.finditer(body):
        ret, name, params = m.group(1), m.group(2), m.group(3).strip()
        ret = re.sub(r"^.*\}\s*", "", ret, flags=re.S)  # after a preceding typedef's brace
        types: List[str] = []
        if params and params != "void":
            for p in params.split(","):
                p = _norm(p)
                # Drop the parameter's name: the last identifier.
                pm = re.match(r"^(.*?)\s*\b([A-Za-z_]\w*)$", p)
                assert pm, f"cannot parse parameter {p!r} of {name}"
                types.append(_norm(pm.group(1)))
        assert name not in functions, f"{name} declared twice"
        functions[name] = (_norm(ret), types)
    return functions


# The ctypes each C type may be declared as.
ACCEPTED = {
    "void": (None,),
    "bool": (c_bool,),
    "int32_t": (c_int32,),
    "uint32_t": (c_uint32,),
    "uint64_t": (c_uint64,),
    "size_t": (c_size_t,),
    "double": (c_double,),
    "size_t *": (POINTER(c_size_t),),
    "bool *": (POINTER(c_bool),),
    "uint32_t *": (POINTER(c_uint32),),
    "uint64_t *": (POINTER(c_uint64),),
    "const char *": (c_char_p,),
    "char *": (POINTER(c_char),),
    "const uint8_t *": (c_char_p, POINTER(c_uint8)),
    "const uint8_t *const *": (POINTER(c_char_p),),
    "const size_t *": (POINTER(c_size_t),),
    "uint8_t *": (POINTER(c_uint8),),
    "enum redlock_status": (c_int,),
    "enum redlock_quarantine_reason": (c_int,),
    "enum redlock_node_outcome *": (POINTER(c_int),),
    "struct redlock_acquire_opts *": (_ffi.AcquireOptsPtr,),
    "struct redlock_cancel *": (_ffi.CancelPtr,),
    "const struct redlock_cancel *": (_ffi.CancelPtr,),
    "const struct redlock_acquire_opts *": (_ffi.AcquireOptsPtr,),
    "struct redlock_config *": (_ffi.ConfigPtr,),
    "const struct redlock_config *": (_ffi.ConfigPtr,),
    "struct redlock_manager *": (_ffi.ManagerPtr,),
    "const struct redlock_manager *": (_ffi.ManagerPtr,),
    "struct redlock_manager **": (POINTER(_ffi.ManagerPtr),),
    "struct redlock_lease *": (_ffi.LeasePtr,),
    "const struct redlock_lease *": (_ffi.LeasePtr,),
    "struct redlock_lease **": (POINTER(_ffi.LeasePtr),),
    "void *": (c_void_p,),
    "redlock_lost_fn": (_ffi.lost_fn_t,),
    "const struct redlock_holders *": (_ffi.HoldersPtr,),
    "struct redlock_holders *": (_ffi.HoldersPtr,),
    "struct redlock_holders **": (POINTER(_ffi.HoldersPtr),),
    "struct redlock_holder_info *": (POINTER(_ffi.HolderInfo),),
    "const struct redlock_leader *": (_ffi.LeaderPtr,),
    "struct redlock_leader *": (_ffi.LeaderPtr,),
    "struct redlock_leader **": (POINTER(_ffi.LeaderPtr),),
}


def test_header_parses_to_a_plausible_api():
    fns = header_functions()
    # A broken parser must not make the comparison below vacuous.
    assert len(fns) >= 20
    assert fns["redlock_lock"] == (
        "enum redlock_status",
        [
            "struct redlock_manager *",
            "const uint8_t *",
            "size_t",
            "uint32_t",
            "struct redlock_lease **",
            "char *",
            "size_t",
        ],
    )
    assert fns["redlock_version"] == ("const char *", [])
    # Every `redlock_*(` in the header's code was parsed as a declaration.
    called = set(re.findall(r"\b(redlock_\w+)\s*\(", _strip(_header_text())))
    assert called == set(fns)


def test_table_names_match_header():
    in_header = set(header_functions())
    in_table = set(_ffi.FUNCTIONS)
    assert in_table == in_header, (
        f"declaration table drifted from include/redlock.h: missing from the table "
        f"{sorted(in_header - in_table)}, not in the header {sorted(in_table - in_header)}"
    )


@pytest.mark.parametrize("name", sorted(_ffi.FUNCTIONS))
def test_table_signature_matches_header(name):
    fns = header_functions()
    assert name in fns, f"{name} is not in include/redlock.h"
    c_ret, c_params = fns[name]
    restype, argtypes = _ffi.FUNCTIONS[name]
    assert len(argtypes) == len(c_params), f"{name}: {len(argtypes)} argtypes, C has {c_params}"
    assert c_ret in ACCEPTED, f"{name}: unknown C return type {c_ret!r}; extend ACCEPTED"
    assert restype in ACCEPTED[c_ret], f"{name}: restype {restype} for C {c_ret!r}"
    for i, (c_t, py_t) in enumerate(zip(c_params, argtypes)):
        assert c_t in ACCEPTED, f"{name}: unknown C type {c_t!r}; extend ACCEPTED"
        assert py_t in ACCEPTED[c_t], f"{name} parameter {i}: {py_t} for C {c_t!r}"


def test_enum_size_is_c_int():
    # The statuses, outcomes and quarantine reasons are C enums with small values: int-sized.
    assert ctypes.sizeof(c_int) == 4


def test_loaded_library_is_bound_to_the_table():
    cdll = _ffi.lib()
    for name, (restype, argtypes) in _ffi.FUNCTIONS.items():
        fn = getattr(cdll, name)
        assert fn.restype == restype, name
        assert tuple(fn.argtypes) == tuple(argtypes), name


def _header_enum(prefix: str) -> Dict[str, int]:
    return {
        m.group(1): int(m.group(2)) for m in re.finditer(prefix + r"(\w+) = (\d+)", _header_text())
    }


def test_status_enum_matches_header():
    in_header = _header_enum("REDLOCK_STATUS_")
    assert in_header, "no REDLOCK_STATUS_ values found"
    assert {s.name: s.value for s in redlock.Status} == in_header


def test_node_outcome_enum_matches_header():
    in_header = _header_enum("REDLOCK_NODE_")
    assert len(in_header) >= 8
    assert {o.name: o.value for o in redlock.NodeOutcome} == in_header


def test_quarantine_reason_enum_matches_header():
    in_header = _header_enum("REDLOCK_QUARANTINE_")
    assert len(in_header) >= 6
    assert {r.name: r.value for r in redlock.QuarantineReason} == in_header


def test_hold_state_and_holder_kind_enums_match_header():
    states = _header_enum("REDLOCK_HOLD_")
    kinds = _header_enum("REDLOCK_HOLDER_")
    assert len(states) == 3 and len(kinds) == 5
    assert {s.name: s.value for s in redlock.HoldState} == states
    assert {k.name: k.value for k in redlock.HolderKind} == kinds


def test_holder_info_struct_matches_header():
    m = re.search(
        r"typedef struct redlock_holder_info \{(.*?)\} redlock_holder_info;", _header_text(), re.S
    )
    assert m, "struct redlock_holder_info not found"
    fields = [
        (fm.group(2), _norm(fm.group(1)))
        for fm in re.finditer(r"^\s*([\w ]+?)\s+(\w+);", _strip(m.group(1)), re.M)
    ]
    c_types = {"enum redlock_hold_state": c_int, "enum redlock_holder_kind": c_int,
               "int64_t": ctypes.c_int64}  # fmt: skip
    assert [(name, c_types[t]) for name, t in fields] == list(_ffi.HolderInfo._fields_)
    assert ctypes.sizeof(_ffi.HolderInfo) == 24


def test_quarantine_reason_of_null_or_out_of_range_is_none():
    cdll = _ffi.lib()
    assert cdll.redlock_manager_node_quarantine_reason(None, 0) == 0
    m = redlock.Redlock(["redis://127.0.0.1:1"])
    try:
        p = m._handle.acquire()
        try:
            assert cdll.redlock_manager_node_quarantine_reason(p, 0) == 0  # not heard from
            assert cdll.redlock_manager_node_quarantine_reason(p, 1) == 0  # out of range
            assert cdll.redlock_manager_node_quarantine_reason(p, 2**64 - 1) == 0
        finally:
            m._handle.release()
    finally:
        m.close()


def test_every_error_status_has_one_exception_class():
    table = _errors.STATUS_EXCEPTIONS
    assert set(table) == {s.value for s in redlock.Status if s != redlock.Status.OK}
    for status, cls in table.items():
        assert issubclass(cls, redlock.RedlockError)
        e = _errors.error_for_status(status, "msg")
        assert type(e) is cls and e.status == status and e.message == "msg"
        assert cls("x").status == status  # default status per class
    assert type(_errors.error_for_status(4242, "odd")) is redlock.RedlockError
    assert _errors.error_for_status(4242, "odd").status == 4242


def test_invalid_handle_status():
    assert redlock.Status.INVALID_HANDLE == 12
    e = _errors.error_for_status(12, "lease is not a live redlock_lease")
    assert type(e) is redlock.InvalidHandle and e.status == 12
    # A forged handle (zeroes) is rejected by the library's magic check, not dereferenced.
    cdll = _ffi.lib()
    forged = (ctypes.c_uint64 * 512)()
    lease = ctypes.cast(forged, _ffi.LeasePtr)
    assert cdll.redlock_unlock(lease, None, 0) == redlock.Status.INVALID_HANDLE
    assert cdll.redlock_lease_validity_ms(lease) == 0
    cdll.redlock_lease_free(lease)  # ignored
    assert all(w == 0 for w in forged)


def test_status_strings_from_the_library():
    cdll = _ffi.lib()
    for s in redlock.Status:
        text = cdll.redlock_status_str(s.value).decode()
        assert text and text != "unknown status", s
    assert cdll.redlock_status_str(6).decode() == "unknown status"


def test_constants_match_header():
    text = _header_text()
    m = re.search(r"#define REDLOCK_MAX_RESOURCE_LEN (\d+)", text)
    assert m and int(m.group(1)) == redlock.MAX_RESOURCE_LEN
    assert "#define REDLOCK_MAX_TTL_MS UINT32_MAX" in text
    m = re.search(r"#define REDLOCK_MAX_RESOURCES (\d+)", text)
    assert m and int(m.group(1)) == redlock.MAX_RESOURCES == _ffi.MAX_RESOURCES == 1000
    m = re.search(r"#define REDLOCK_MAX_PERMITS (\d+)", text)
    assert m and int(m.group(1)) == redlock.MAX_PERMITS == _ffi.MAX_PERMITS == 1000
    m = re.search(r"#define REDLOCK_MAX_LEADER_VALUE (\d+)", text)
    assert m and int(m.group(1)) == redlock.MAX_LEADER_VALUE == _ffi.MAX_LEADER_VALUE == 65536
    for name, value in (
        ("DEFAULT_DROP_OUT_MS", redlock.DEFAULT_DROP_OUT_MS),
        ("MIN_DROP_OUT_MS", redlock.MIN_DROP_OUT_MS),
        ("MAX_DROP_OUT_MS", redlock.MAX_DROP_OUT_MS),
    ):
        m = re.search(rf"#define REDLOCK_{name} (\d+)", text)
        assert m and int(m.group(1)) == value == getattr(_ffi, name), name
    for name, value in (
        ("LABEL", redlock.MAX_LABEL_LEN),
        ("KEY_PREFIX", redlock.MAX_KEY_PREFIX_LEN),
    ):
        m = re.search(rf"#define REDLOCK_MAX_{name}_LEN (\d+)", text)
        assert m and int(m.group(1)) == value, name
    # ``~0`` in a size_t context: SIZE_MAX.
    assert "#define REDLOCK_HOLDERS_QUORUM ~0" in text
    assert _ffi.HOLDERS_QUORUM == 2 ** (8 * ctypes.sizeof(c_size_t)) - 1
    assert redlock.MAX_TTL_MS == 2**32 - 1 == _ffi.UINT32_MAX


def test_lock_flags_match_header():
    from redlock import _core

    flags = {m.group(1): int(m.group(2)) for m in re.finditer(
        r"#define REDLOCK_LOCK_(\w+) (\d+)", _header_text())}
    assert flags == {"FENCED": _core.LOCK_FENCED, "ONCE": _core.LOCK_ONCE, "WAIT": _core.LOCK_WAIT}


def test_versions_agree():
    text = _header_text()
    header_version = re.search(r'#define REDLOCK_VERSION "([^"]+)"', text).group(1)
    with open(os.path.join(REPO_ROOT, "Cargo.toml"), encoding="utf-8") as f:
        cargo_version = re.search(r'(?m)^version = "([^"]+)"', f.read()).group(1)
    with open(os.path.join(PACKAGE_ROOT, "pyproject.toml"), encoding="utf-8") as f:
        py_version = re.search(r'(?m)^version = "([^"]+)"', f.read()).group(1)
    assert redlock.version() == redlock.__version__
    assert redlock.__version__ == header_version == cargo_version == py_version


def test_callback_typedef_matches_header():
    m = re.search(r"typedef (\w+) \(\*redlock_lost_fn\)\(([^)]*)\);", _header_text())
    assert m, "redlock_lost_fn typedef not found"
    assert m.group(1) == "void" and _ffi.lost_fn_t._restype_ is None
    params = [_norm(re.sub(r"\s*\b\w+$", "", p.strip())) for p in m.group(2).split(",")]
    assert params == ["struct redlock_lease *", "void *"]
    assert list(_ffi.lost_fn_t._argtypes_) == [_ffi.LeasePtr, c_void_p]
