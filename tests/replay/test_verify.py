"""CPU tier: verification policies (the comparison replay runs after a launch)."""

from __future__ import annotations

import numpy as np
import pytest

from mneme_cc.errors import UsageError
from mneme_cc.replay.judging.verify import Policy, compare, policies_for


def as_bytes(a: np.ndarray) -> np.ndarray:
    return np.frombuffer(a.tobytes(), np.uint8)


def test_bitwise_by_default_names_the_first_bytes():
    want = np.arange(100, dtype=np.float32)
    got = want.copy()
    assert compare("b", 0x1000, as_bytes(got), as_bytes(want)) is None
    got[7] = np.nextafter(got[7], np.float32(1e9))
    m = compare("b", 0x1000, as_bytes(got), as_bytes(want))
    assert m.buffer == "b" and m.count == 1 and m.first_indices == [28]  # byte offset


@pytest.mark.parametrize("policy, verdict", [
    ({"dtype": "float64", "abs": 1e-12}, True),
    ({"dtype": "float64", "abs": 1e-16}, False),
    ({"dtype": "float64", "rel": 1e-12}, True),
    ({"dtype": "float64", "ulp": 2}, False),
    ({"dtype": "float64", "ulp": 2000}, True),
    ({"dtype": "float64", "norm": "linf", "abs": 1e-12}, True),
    ({"dtype": "float64", "norm": "l2", "rel": 1e-20}, False),
])
def test_tolerances(policy, verdict):
    want = np.linspace(1.0, 2.0, 1000)
    got = want + 1e-13
    result = compare("x", 0, as_bytes(got), as_bytes(want), Policy.parse(policy, "x"))
    assert (result is None) == verdict
    if result is not None:
        assert result.worst_abs == pytest.approx(1e-13, rel=0.1) and result.count > 0


def test_nan_must_meet_nan_and_ulp_spans_zero():
    want = np.array([np.nan, 1.0, -0.0], np.float32)
    assert compare("x", 0, as_bytes(want.copy()), as_bytes(want),
                   Policy(dtype="float32", abs=1.0)) is None
    got = np.array([1.0, 1.0, 0.0], np.float32)
    m = compare("x", 0, as_bytes(got), as_bytes(want), Policy(dtype="float32", abs=1.0))
    assert m.first_indices == [0]
    tiny = np.array([np.nextafter(np.float32(0), np.float32(1))], np.float32)
    assert compare("x", 0, as_bytes(tiny), as_bytes(-tiny), Policy(dtype="float32", ulp=2)) is None


def test_policies_address_buffers_by_argument_and_address():
    class Region:
        def __init__(self, address, size):
            self.address, self.size = address, size

    regions = [Region(0x200000000000, 4096), Region(0x200000200000, 4096)]
    params = [{"offset": 0, "size": 8}, {"offset": 8, "size": 4}]
    args = (0x200000200010).to_bytes(8, "little") + bytes(4)
    out = policies_for({"arg:0": {"dtype": "float32", "ulp": 4},
                        "0x200000000000": {"dtype": "int32"}, "c_weights": {}},
                       params, args, regions)
    assert set(out) == {"allocation 0x200000200000", "allocation 0x200000000000", "c_weights"}
    with pytest.raises(UsageError, match="not a pointer"):
        policies_for({"arg:1": {}}, params, args, regions)
    with pytest.raises(UsageError, match="unknown field"):
        Policy.parse({"dtype": "float32", "tolerance": 1}, "x")
    with pytest.raises(UsageError, match="needs a dtype"):
        Policy.parse({"abs": 1e-3}, "x")
    with pytest.raises(UsageError, match="norm must be"):
        Policy.parse({"dtype": "float32", "norm": "l7"}, "x")
    with pytest.raises(UsageError, match="arg:N takes a parameter index"):
        policies_for({"arg:x": {"dtype": "float32"}}, params, args, regions)
    with pytest.raises(UsageError, match="not a hex address"):
        policies_for({"0xZZ": {"dtype": "float32"}}, params, args, regions)
    with pytest.raises(UsageError, match="not an object of fields"):
        policies_for({"arg:0": 5}, params, args, regions)
    with pytest.raises(UsageError, match="abs, rel and ulp are numbers >= 0"):
        Policy.parse({"dtype": "float32", "abs": "big"}, "x")


def test_a_gpu_worker_prepares_verification_as_it_starts(tmp_path):
    """What the first replay's verification would read and copy to the device
    is read (each chunk checked) and copied once, before any replay; a damaged
    chunk is said then. A device double stands for the GPU."""
    from types import SimpleNamespace

    from synthetic_db import make_database

    from mneme_cc.errors import RecordDBError
    from mneme_cc.record import RecordDB
    from mneme_cc.replay.running.replayer import Replayer

    data = np.arange(4096, dtype=np.float32)
    make_database(tmp_path / "db", data, data, data + data)
    (inst,) = RecordDB(tmp_path / "db").instances

    class Expected:
        def __init__(self):
            self.copied, self.read = [], []

        def on_device(self, region):
            self.copied.append(region.name)
            self.read.append(region.read().nbytes)

        def host(self, region):
            self.read.append(region.read().nbytes)

    replayer = Replayer(inst)
    replayer.state, replayer._comparer = SimpleNamespace(expected=Expected()), object()
    replayer.prepare_verification()
    expected = replayer.state.expected
    assert sorted(expected.copied) == sorted(r.name for r in inst.epilogue.allocations)
    assert expected.copied and "epilogue" in replayer._artifacts_checked
    # A damaged chunk of the epilogue: one line, before any replay.
    digest = next(d for r in inst.epilogue.allocations for d in r.chunks.values())
    chunk = tmp_path / "db" / "chunks" / digest[:2] / digest
    chunk.write_bytes(chunk.read_bytes()[:-3] + b"xyz")
    damaged = Replayer(RecordDB(tmp_path / "db").instances[0])
    damaged.state, damaged._comparer = SimpleNamespace(expected=Expected()), object()
    with pytest.raises(RecordDBError, match=digest[:8]):
        damaged.prepare_verification()


def test_the_expected_epilogue_is_made_on_the_device_from_the_prologue(tmp_path, monkeypatch):
    """A written allocation's expected copy is its pristine prologue copy with
    the recorded changes over it (only the changed chunks read); one the
    kernel leaves alone is copied from itself as the session restores it,
    and once that copy is gone, from the recorded bytes, never from what a
    launch left. An epilogue lacking an allocation is a damaged database.
    A device double whose memory is buffers at addresses stands for the GPU."""
    from synthetic_db import make_database

    from mneme_cc.record import RecordDB
    from mneme_cc.replay.running import device as dev
    from mneme_cc.replay.running.device_state import DeviceState

    class Memory:
        def __init__(self):
            self.buffers: dict[int, bytearray] = {}

        def place(self, address: int, size: int) -> tuple[bytearray, int]:
            for base, buffer in self.buffers.items():
                if base <= address and address + size <= base + len(buffer):
                    return buffer, address - base
            raise AssertionError(f"no buffer holds {address:#x}+{size}")

        def write(self, address: int, data: bytes) -> None:
            buffer, at = self.place(address, len(data))
            buffer[at:at + len(data)] = data

        def read(self, address: int, size: int) -> bytes:
            buffer, at = self.place(address, size)
            return bytes(buffer[at:at + size])

    memory = Memory()

    class Device:
        next_address = 0x7F0000000000

        def alloc(self, size, what):
            address, Device.next_address = Device.next_address, Device.next_address + (1 << 24)
            memory.buffers[address] = bytearray(size)
            return address

        def free(self, address):
            memory.buffers.pop(address, None)

        def copy_dtod(self, destination, source, size, what):
            memory.write(destination, memory.read(source, size))

        def copy_dtod_async(self, destination, source, size, what):
            self.copy_dtod(destination, source, size, what)

        def finish_copies(self, what):
            pass

    class Window:
        def __init__(self, device, base, size, granularity):
            pass

        def map(self, address, size):
            memory.buffers[address] = bytearray(size)

        def close(self):
            pass

    monkeypatch.setattr(dev, "Window", Window)
    monkeypatch.setattr(dev, "copy_to_device",
                        lambda address, data, what="": memory.write(address, data.tobytes()))
    a = np.arange(5000, dtype=np.float32)
    b = np.full(5000, 0.5, np.float32)
    make_database(tmp_path / "db", a, b, a + b)
    (inst,) = RecordDB(tmp_path / "db").instances
    state = DeviceState(Device(), inst)
    for region in inst.prologue.allocations:
        assert memory.read(region.address, region.size) == region.read().tobytes()
    read: list[str] = []
    db_read = inst.db.read_chunk
    inst.db.read_chunk = lambda digest: read.append(digest) or db_read(digest)
    epilogue = {r.address: r for r in inst.epilogue.allocations}
    written = [r for r in epilogue.values() if r.chunks]
    left = [r for r in epilogue.values() if not r.chunks]
    assert len(written) == 1 and len(left) == 2
    copies = {address: state.expected.on_device(r) for address, r in epilogue.items()}
    assert sorted(read) == sorted(written[0].chunks.values())  # the changes alone
    inst.db.read_chunk = db_read
    for address, region in epilogue.items():
        assert memory.read(copies[address], region.size) == region.read().tobytes()
    # A launch follows a restore: what it leaves in an allocation it should
    # not have written is never taken for the recorded prologue.
    state.restore({})
    for region in (left[0], written[0]):
        memory.write(region.address, b"\xff" * region.size)
    state.expected.close()
    for region in (left[0], written[0]):
        copy = state.expected.on_device(region)
        assert memory.read(copy, region.size) == region.read().tobytes() != b"\xff" * region.size
    # What verification puts back into an allocation the recording never
    # wrote comes from that device copy, not from the database again.
    inst.db.read_chunk = lambda digest: read.append(digest) or db_read(digest)
    read.clear()
    state.put_back(left[0])
    inst.db.read_chunk = db_read
    assert not read and memory.read(left[0].address, left[0].size) == left[0].read().tobytes()
    # A forged epilogue whose allocation is not its prologue's size is read
    # from the database, never copied past the prologue's copy.
    half = written[0].size // 2
    state.expected.prologues[written[0].address] = (Device().alloc(half, ""), half)
    state.expected.close()
    copy = state.expected.on_device(written[0])
    assert memory.read(copy, written[0].size) == written[0].read().tobytes()
    # An epilogue that lacks one of its prologue's allocations is a damaged
    # database, said in one line as the session opens.
    from mneme_cc import _native
    from mneme_cc.errors import RecordDBError

    entry = make_database(tmp_path / "lacking", a, b, a + b)
    path = tmp_path / "lacking" / entry["epilogue"]
    decoded = _native.decode_state(path.read_bytes())
    decoded["regions"] = decoded["regions"][1:]
    path.write_bytes(_native.encode_state(decoded))
    (lacking,) = RecordDB(tmp_path / "lacking").instances
    with pytest.raises(RecordDBError, match=r"lacks the allocation at 0x[0-9a-f]+ its prologue"):
        DeviceState(Device(), lacking)
