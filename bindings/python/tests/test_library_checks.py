"""Rules the library checks are not re-checked by the binding: the library's own message
reaches the caller unchanged."""

from __future__ import annotations

import math

import pytest

import redlock


@pytest.mark.parametrize("factor", [math.nan, math.inf, -math.inf, 1.0, -0.5])
def test_drift_factor_range_is_the_librarys_message(factor):
    with pytest.raises(redlock.InvalidArgument) as ei:
        redlock.Redlock(["redis://127.0.0.1:7001"], drift_factor=factor)
    # redlock_config_set_drift_factor's own words (include/redlock.h: finite, in [0, 1)).
    assert "drift factor must be in [0, 1)" in ei.value.message, ei.value.message
    assert ei.value.status == redlock.Status.INVALID_ARGUMENT
