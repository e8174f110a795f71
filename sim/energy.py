"""An energy estimate of a run from its traffic (``sim.traffic``), with one table of energies
per operation.

Source of every number in ``PJ``, ``SRAM_PJ_64`` and ``DRAM_PJ_64``: M. Horowitz, "Computing's
energy problem (and what we can do about it)", ISSCC 2014, pp. 10-14 (45 nm, 0.9 V):

    8-bit int multiply 0.2 pJ, 8-bit int add 0.03 pJ, 32-bit int add 0.1 pJ, 32-bit int
    multiply 3.1 pJ, 16-bit float add 0.4 pJ, 16-bit float multiply 1.1 pJ, 32-bit float add
    0.9 pJ, 32-bit float multiply 3.7 pJ; reading 64 bits from an SRAM of 8 KB 10 pJ, of 32 KB
    20 pJ, of 1 MB 100 pJ; 64 bits of DRAM 1.3-2.6 nJ.

Assumptions (an estimate of the order of magnitude, not of a chip):

- A MAC is one multiply of the operand type and one 32-bit add of the accumulation: int8 and
  int4 (no int4 number in the table: the int8 one, an upper bound) 0.2 + 0.1 pJ; the float
  types (bf16, fp8: the 16-bit float multiply, an upper bound) 1.1 + 0.9 pJ (binary32 sums).
- Each buffer is an SRAM of the smallest size class (8 KB, 32 KB, 1 MB) that holds it, by its
  bytes: the unified buffer ``ub_rows`` x R operands, the weight FIFO ``weight_fifo_depth``
  tiles of R x C operands, the accumulator ``acc_rows`` x C sums of ``acc_width`` bits; one
  larger than 1 MB takes the 1 MB number (an underestimate). Moving a byte costs an eighth of
  the 64-bit access; a write costs what a read does; a read-modify-write is a read and a write.
- The link (host-in and host-out bytes) is counted as off-chip DRAM-like traffic at the low end,
  1.3 nJ per 64 bits, and reported apart: ``pj_per_mac`` and ``move_share`` are on chip (MACs
  and buffer accesses), ``*_with_link`` add the link.
- Not counted: the activation unit's requantization, the parameter sets, the array's
  registers (the systolic movement of operands and sums between cells), control and leakage.
- The design without operand reuse (``Traffic.no_reuse_*``) fetches its operands from an SRAM of
  the unified buffer's class and its partial sums from one of the accumulator's class.
"""

from dataclasses import asdict, dataclass

from tpugen.hdl.config import Config
from tpugen.sim.traffic import Traffic

__all__ = ["PJ", "SRAM_PJ_64", "DRAM_PJ_64", "Energy", "sram_pj_64", "mac_pj", "buffer_bytes",
           "energy"]

#: Energy of one arithmetic operation, pJ (Horowitz, ISSCC 2014, 45 nm).
PJ = {
    "int8_mul": 0.2, "int8_add": 0.03, "int32_add": 0.1, "int32_mul": 3.1,
    "fp16_add": 0.4, "fp16_mul": 1.1, "fp32_add": 0.9, "fp32_mul": 3.7,
}
#: Reading 64 bits from an SRAM of at most ``size`` bytes: ``(size, pJ)``, smallest first.
SRAM_PJ_64 = ((8 * 1024, 10.0), (32 * 1024, 20.0), (1024 * 1024, 100.0))
#: 64 bits of DRAM, pJ: (low, high).
DRAM_PJ_64 = (1300.0, 2600.0)


def sram_pj_64(size_bytes: int) -> float:
    """pJ to read 64 bits from an SRAM of ``size_bytes``: the smallest class that holds it."""
    for size, pj in SRAM_PJ_64:
        if size_bytes <= size:
            return pj
    return SRAM_PJ_64[-1][1]


def mac_pj(config: Config) -> float:
    """pJ of one MAC of ``config``'s operand type (module docstring)."""
    if config.operand_type.is_float:
        return PJ["fp16_mul"] + PJ["fp32_add"]
    return PJ["int8_mul"] + PJ["int32_add"]


def buffer_bytes(config: Config) -> dict:
    """The bytes of the unified buffer, the weight FIFO and the accumulator buffer."""
    r, c, ob = config.rows, config.cols, config.operand_width
    return {"ub": -(-config.ub_rows * r * ob // 8),
            "fifo": -(-config.weight_fifo_depth * r * c * ob // 8),
            "acc": -(-config.acc_rows * c * config.acc_width // 8)}


@dataclass
class Energy:
    """A run's energy estimate in pJ (module docstring)."""

    macs: int
    mac_pj: float
    sram_pj_64: dict
    compute_pj: float
    ub_pj: float
    fifo_pj: float
    acc_pj: float
    link_pj: float
    no_reuse_move_pj: float

    @property
    def move_pj(self) -> float:
        return self.ub_pj + self.fifo_pj + self.acc_pj

    def _per_mac(self, pj: float) -> float | None:
        return pj / self.macs if self.macs else None

    @property
    def pj_per_mac(self) -> float | None:
        return self._per_mac(self.compute_pj + self.move_pj)

    @property
    def move_share(self) -> float | None:
        total = self.compute_pj + self.move_pj
        return self.move_pj / total if total else None

    @property
    def pj_per_mac_with_link(self) -> float | None:
        return self._per_mac(self.compute_pj + self.move_pj + self.link_pj)

    @property
    def move_share_with_link(self) -> float | None:
        total = self.compute_pj + self.move_pj + self.link_pj
        return (self.move_pj + self.link_pj) / total if total else None

    @property
    def no_reuse_pj_per_mac(self) -> float | None:
        return self._per_mac(self.compute_pj + self.no_reuse_move_pj)

    def to_dict(self) -> dict:
        out = asdict(self)
        out.update(move_pj=self.move_pj, pj_per_mac=self.pj_per_mac, move_share=self.move_share,
                   pj_per_mac_with_link=self.pj_per_mac_with_link,
                   move_share_with_link=self.move_share_with_link,
                   no_reuse_pj_per_mac=self.no_reuse_pj_per_mac)
        return out

    def lines(self) -> list[str]:
        """Report lines (``"name         value"``)."""
        if not self.macs:
            return [f"energy       no MACs; moving data {self.move_pj:.0f} pJ on chip, link "
                    f"{self.link_pj:.0f} pJ"]
        return [
            f"energy       {self.pj_per_mac:.3f} pJ/MAC on chip ({100 * self.move_share:.0f} % "
            f"moving data; MAC {self.mac_pj:.2f} pJ), Horowitz ISSCC 2014, 45 nm",
            f"with link    {self.pj_per_mac_with_link:.3f} pJ/MAC ("
            f"{100 * self.move_share_with_link:.0f} % moving data; link as DRAM "
            f"{DRAM_PJ_64[0]:.0f} pJ / 64 bits)",
            f"no reuse     {self.no_reuse_pj_per_mac:.3f} pJ/MAC on chip (operands and partial "
            f"sums from SRAM every MAC)",
        ]


def energy(traffic: Traffic, config: Config) -> Energy:
    """The energy estimate of ``traffic`` (``sim.traffic.program_traffic``) on ``config``."""
    size = buffer_bytes(config)
    pj64 = {k: sram_pj_64(v) for k, v in size.items()}
    per_byte = {k: v / 8 for k, v in pj64.items()}
    t = traffic
    acc_bytes = t.acc_read_bytes + t.acc_write_bytes + 2 * t.acc_rmw_bytes
    link_bytes = t.host_in_bytes + t.host_out_bytes
    mac = mac_pj(config)
    return Energy(
        macs=t.macs, mac_pj=mac, sram_pj_64=pj64, compute_pj=t.macs * mac,
        ub_pj=(t.ub_read_bytes + t.ub_write_bytes) * per_byte["ub"],
        fifo_pj=(t.fifo_push_bytes + t.fifo_pop_bytes) * per_byte["fifo"],
        acc_pj=acc_bytes * per_byte["acc"],
        link_pj=link_bytes * DRAM_PJ_64[0] / 8,
        no_reuse_move_pj=(t.no_reuse_operand_bytes * per_byte["ub"]
                          + t.no_reuse_psum_bytes * per_byte["acc"]))
