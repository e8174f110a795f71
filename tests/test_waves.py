"""``tpugen sim --waves`` writes a waveform of the run on every simulating backend."""

import json
import re
import struct

import pytest

from tpugen import cli
from tpugen.sim.cache import build_root


@pytest.mark.parametrize("backend,suffix", [
    ("amaranth", ".vcd"), ("icarus", ".fst"), ("verilator", ".vcd")])
def test_waves(backend, suffix, capsys):
    path = build_root() / f"test_waves_{backend}{suffix}"
    path.unlink(missing_ok=True)
    status = cli.main(["sim", "--rows", "2", "--cols", "3", "--m", "3", "--k", "4", "--n", "5",
                       "--backend", backend, "--waves", str(path), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert status == 0 and report["passed"] and report["waves"] == str(path)
    data = path.read_bytes()
    if suffix == ".vcd":
        text = data.decode()
        # The core's ports, and a time step for every cycle of the run at least.
        assert re.search(r"\$var wire 1 \S+ host_out__valid", text), text[:2000]
        assert re.search(r"\$var wire 64 \S+ cmd__payload", text)
        assert len(re.findall(r"^#\d+", text, re.M)) >= report["cycles"]
    else:
        # FST: the header block first (type 0, 329 bytes long, big endian length).
        assert data[0] == 0 and struct.unpack(">Q", data[1:9])[0] == 329
        assert len(data) > 329


def test_waves_wrong_suffix(capsys):
    assert cli.main(["sim", "--m", "1", "--k", "1", "--n", "1", "--backend", "icarus",
                     "--waves", "x.vcd"]) == 2
    assert "writes FST" in capsys.readouterr().err
