"""``--waves`` writes a waveform file on every simulating backend."""

import pytest

from tpugen.hdl.config import Config
from tpugen.sim.cache import build_root
from tpugen.simulate import run_sim


@pytest.mark.parametrize("backend,suffix,magic", [
    ("amaranth", ".vcd", b"$"), ("icarus", ".fst", None), ("verilator", ".vcd", b"$")])
def test_waves(backend, suffix, magic):
    path = build_root() / f"test_waves_{backend}{suffix}"
    path.unlink(missing_ok=True)
    lines = []
    status = run_sim(Config(rows=2, cols=3), m=3, k=4, n=5, backend=backend, waves=str(path),
                     out=lines.append)
    assert status == 0, lines
    data = path.read_bytes()
    assert len(data) > 1000
    if magic:
        assert data.lstrip()[:1] == magic


def test_waves_wrong_suffix():
    with pytest.raises(ValueError, match="writes FST"):
        run_sim(Config(rows=2, cols=3), m=1, k=1, n=1, backend="icarus", waves="x.vcd")
