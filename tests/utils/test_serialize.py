"""towerpack.utils.serialize: dumps/loads in towerpack's record format by default, pickle when asked."""

from __future__ import annotations

import numpy as np
import pytest

from towerpack.dataflow import WireFormatError
from towerpack.utils import compatible_serialize, serialize
from towerpack.utils.serialize import dumps, loads


class Custom:
    def __init__(self, x):
        self.x = x


@pytest.fixture(autouse=True)
def default_format(monkeypatch):
    monkeypatch.delenv(serialize.FORMAT_VAR, raising=False)


def test_the_default_round_trips_datapoints_without_pickle():
    obj = [
        np.arange(12, dtype=np.float32).reshape(3, 4),
        (1, 2.5, "s", b"\x00" * 2000),
        {"k": None, "b": True},
    ]
    buf = dumps(obj)
    assert isinstance(buf, bytes) and b"pickle" not in buf
    back = loads(buf)
    np.testing.assert_array_equal(back[0], obj[0])
    assert back[0].dtype == np.float32 and not back[0].flags.writeable
    assert back[1] == (1, 2.5, "s", b"\x00" * 2000) and isinstance(back[1], tuple)
    assert back[2] == {"k": None, "b": True}
    assert loads(memoryview(buf))[1] == obj[1]


def test_the_default_refuses_objects_and_damaged_buffers():
    with pytest.raises(TypeError, match="TENSORPACK_SERIALIZE=pickle"):
        dumps([Custom(1)])
    buf = bytearray(dumps([np.ones(100)]))
    buf[40] ^= 0xFF
    with pytest.raises(WireFormatError):
        loads(bytes(buf))
    with pytest.raises(WireFormatError):
        loads(b"not a record")


def test_pickle_when_asked_and_bad_formats_named(monkeypatch):
    monkeypatch.setenv(serialize.FORMAT_VAR, "pickle")
    back = loads(dumps({"obj": Custom(3), "a": np.eye(2)}))
    assert back["obj"].x == 3 and back["a"].flags.writeable
    monkeypatch.setenv(serialize.FORMAT_VAR, "pyarrow")
    with pytest.raises(ValueError, match="pyarrow no longer has the serialization API"):
        dumps(1)
    monkeypatch.setenv(serialize.FORMAT_VAR, "json")
    with pytest.raises(ValueError, match="TENSORPACK_SERIALIZE='json': use 'msgpack' or 'pickle'"):
        loads(b"")


def test_compatible_serialize_is_the_same_module_api():
    assert compatible_serialize.dumps is dumps and compatible_serialize.loads is loads
    assert serialize.dumps_once is dumps and serialize.loads_once is loads
