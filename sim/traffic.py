"""The memory traffic of a program, counted from its instruction words alone (``isa.decode`` and
the ISA's tables, ``hdl/isa.py``), not from a run: what each op moves by the ISA's meaning.

Counted per executed instruction (an instruction the word alone makes illegal,
``isa.static_cause``, is dropped and counts nothing; the counts are those of a run without
dynamic errors such as NO_TILE):

- **link**: host-in bytes (READ_HOST, READ_WEIGHTS and READ_QUANT beats x max(R, C) lanes x
  the host lane's bytes; the ``last`` flags aside) and host-out bytes (WRITE_HOST, SYNC and
  READ_COUNTERS beats x C lanes x the accumulator's bytes).
- **unified buffer** (rows of R operands): reads by MATMUL (its activations) and WRITE_HOST
  from UB; writes by READ_HOST and ACTIVATE.
- **weight memory** (tile rows of C operands): rows written by STORE_WEIGHTS (from the host-in
  beats), rows read by LOAD_WEIGHTS (n x R, pushed into the weight FIFO).
- **weight FIFO** (tile rows of C operands): beats pushed by READ_WEIGHTS and LOAD_WEIGHTS
  (n x R) and beats
  popped by MATMUL with NEW_TILE (R: the tile it takes; a MATMUL without NEW_TILE reuses the
  tile held in the array and reads nothing).
- **accumulator buffer** (rows of C sums): writes by MATMUL (overwrite), read-modify-writes by
  MATMUL with ACCUMULATE (one per row), reads by ACTIVATE and WRITE_HOST FROM_ACC.
- **quantization parameters**: READ_QUANT's host-in beats (12 a set) into the sets, and the set
  each ACTIVATE reads (one per ACTIVATE instruction).
- **MACs**: MATMUL rows x R x C (every cell works on each row, zero-padded lanes too).
- **no operand reuse**: the same MACs on a load/store machine that fetches both operands of every
  MAC from its buffer (2 operand fetches per MAC) and reads and writes its partial sum (1 read,
  1 write of an accumulator per MAC). ``reuse`` is its operand bytes over the operand bytes this
  design fetches (unified-buffer rows read by MATMUL plus weight-FIFO beats popped).

Bytes of operands are ``ceil(bits / 8)`` of the total (int4 operands take half a byte).
The words counted are the ones the core runs: a PROGRAM STORE's n words go into the program
memory (a STORE the word makes illegal takes them too, and stores none), a CALL runs its words
from there; the program memory starts empty (words 0: NOPs) unless ``pmem`` is given.
"""

from dataclasses import asdict, dataclass

from tpugen.hdl import isa
from tpugen.hdl.config import Config
from tpugen.hdl.layouts import host_lane_width, host_lanes
from tpugen.sim.program import Program

__all__ = ["Traffic", "program_traffic"]


def _bytes(bits: int) -> int:
    return -(-bits // 8)


@dataclass
class Traffic:
    """A program's traffic (module docstring); rows, beats and bytes as ints."""

    rows: int
    cols: int
    operand_bits: int
    acc_bits: int
    instructions: int = 0
    dropped: int = 0
    host_in_beats: int = 0
    host_in_bytes: int = 0
    host_out_beats: int = 0
    host_out_bytes: int = 0
    ub_read_rows: int = 0
    ub_read_bytes: int = 0
    ub_write_rows: int = 0
    ub_write_bytes: int = 0
    matmul_rows: int = 0
    matmul_ub_bytes: int = 0
    wmem_write_rows: int = 0
    wmem_read_rows: int = 0
    fifo_push_beats: int = 0
    fifo_push_bytes: int = 0
    fifo_pop_beats: int = 0
    fifo_pop_bytes: int = 0
    acc_read_rows: int = 0
    acc_write_rows: int = 0
    acc_rmw_rows: int = 0
    acc_read_bytes: int = 0
    acc_write_bytes: int = 0
    acc_rmw_bytes: int = 0
    quant_in_beats: int = 0
    quant_set_reads: int = 0
    macs: int = 0

    @property
    def operand_bytes(self) -> int:
        """Operand bytes this design fetches for its MACs: UB rows read by MATMUL and weight-FIFO
        beats popped."""
        return self.matmul_ub_bytes + self.fifo_pop_bytes

    @property
    def no_reuse_operand_bytes(self) -> int:
        """Operand bytes a load/store machine fetches for the same MACs: 2 a MAC."""
        return _bytes(2 * self.macs * self.operand_bits)

    @property
    def no_reuse_psum_bytes(self) -> int:
        """Its partial-sum bytes: one accumulator read and one write a MAC."""
        return _bytes(2 * self.macs * self.acc_bits)

    @property
    def reuse(self) -> float | None:
        """No-reuse operand bytes over this design's operand bytes (None without MACs)."""
        return self.no_reuse_operand_bytes / self.operand_bytes if self.operand_bytes else None

    def to_dict(self) -> dict:
        out = asdict(self)
        out.update(operand_bytes=self.operand_bytes,
                   no_reuse_operand_bytes=self.no_reuse_operand_bytes,
                   no_reuse_psum_bytes=self.no_reuse_psum_bytes, reuse=self.reuse)
        return out

    def lines(self) -> list[str]:
        """Report lines (``"name         value"``, as ``tpugen sim`` prints them)."""
        reuse = "-" if self.reuse is None else f"{self.reuse:.1f} x"
        acc = self.acc_read_bytes + self.acc_write_bytes + 2 * self.acc_rmw_bytes
        return [
            f"link in      {self.host_in_bytes} bytes ({self.host_in_beats} beats)",
            f"link out     {self.host_out_bytes} bytes ({self.host_out_beats} beats)",
            f"UB           read {self.ub_read_rows} rows ({self.ub_read_bytes} bytes), "
            f"write {self.ub_write_rows} rows ({self.ub_write_bytes} bytes)",
            f"weight mem.  write {self.wmem_write_rows} tile rows, read {self.wmem_read_rows}",
            f"weight FIFO  push {self.fifo_push_beats} tile rows ({self.fifo_push_bytes} bytes), "
            f"pop {self.fifo_pop_beats} ({self.fifo_pop_bytes} bytes)",
            f"accumulator  read {self.acc_read_rows} rows, write {self.acc_write_rows}, "
            f"read-modify-write {self.acc_rmw_rows} ({acc} bytes moved)",
            f"quant        {self.quant_in_beats} beats in, {self.quant_set_reads} set reads",
            f"MACs         {self.macs} ({self.matmul_rows} MATMUL rows x {self.rows} x "
            f"{self.cols})",
            f"reuse        {reuse} (no-reuse operand bytes {self.no_reuse_operand_bytes} / "
            f"{self.operand_bytes} fetched)",
        ]


def _count(t: Traffic, f: dict, config: Config) -> None:
    """Add one executed instruction's traffic (decoded fields ``f``) to ``t``."""
    op, n, flags = f["op"], f["n"], f["flags"]
    r, c = config.rows, config.cols
    beats_in = isa.host_in_beats(f, config)
    t.host_in_beats += beats_in
    t.host_out_beats += isa.host_out_beats(f, config)
    if op == isa.Op.MATMUL:
        t.ub_read_rows += n
        t.matmul_rows += n
        t.macs += n * r * c
        if flags & isa.Flag.NEW_TILE:
            t.fifo_pop_beats += r
        if flags & isa.Flag.ACCUMULATE:
            t.acc_rmw_rows += n
        else:
            t.acc_write_rows += n
    elif op == isa.Op.ACTIVATE:
        t.acc_read_rows += n
        t.ub_write_rows += n
        t.quant_set_reads += 1
    elif op == isa.Op.WRITE_HOST:
        if flags & isa.Flag.FROM_ACC:
            t.acc_read_rows += n
        else:
            t.ub_read_rows += n
    elif op == isa.Op.READ_HOST:
        t.ub_write_rows += n
    elif op == isa.Op.READ_WEIGHTS:
        t.fifo_push_beats += beats_in
    elif op == isa.Op.STORE_WEIGHTS:
        t.wmem_write_rows += beats_in
    elif op == isa.Op.LOAD_WEIGHTS:
        t.wmem_read_rows += n * r
        t.fifo_push_beats += n * r
    elif op == isa.Op.READ_QUANT:
        t.quant_in_beats += beats_in


def _run_words(program: Program, pmem: dict) -> list[int]:
    """The words the core runs for ``program`` (module docstring); ``pmem`` (``{index: word}``)
    is updated by its STOREs."""
    config, out, store = program.config, [], None      # store: [next index, words left]
    for word in program.words():
        if store is not None:
            if store[0] < config.program_words:
                pmem[store[0]] = word
            store = [store[0] + 1, store[1] - 1] if store[1] > 1 else None
            continue
        out.append(word)
        f = isa.decode(word)
        if f["op"] != isa.Op.PROGRAM or f["flags"] & isa.Flag.TAG:
            continue
        ok = isa.static_cause(f, config) == isa.Cause.NONE
        if f["flags"] & isa.Flag.STORE and f["n"] and config.program_words:
            store = [f["dst"] if ok else config.program_words, f["n"]]
        elif ok:
            out += [pmem.get(k, 0) for k in range(f["src"], f["src"] + f["n"])]
    return out


def program_traffic(program: Program, pmem: dict | None = None) -> Traffic:
    """The traffic of ``program`` (module docstring), from its words alone; ``pmem``: the
    program memory's words (``{index: word}``) before it, updated by its STOREs."""
    config = program.config
    r, c, ob, ab = config.rows, config.cols, config.operand_width, config.acc_width
    t = Traffic(rows=r, cols=c, operand_bits=ob, acc_bits=ab)
    for word in _run_words(program, {} if pmem is None else pmem):
        f = isa.decode(word)
        t.instructions += 1
        if isa.static_cause(f, config) != isa.Cause.NONE:
            t.dropped += 1
            continue
        _count(t, f, config)
    t.host_in_bytes = _bytes(t.host_in_beats * host_lanes(config) * host_lane_width(config))
    t.host_out_bytes = _bytes(t.host_out_beats * c * ab)
    t.ub_read_bytes = _bytes(t.ub_read_rows * r * ob)
    t.ub_write_bytes = _bytes(t.ub_write_rows * r * ob)
    t.matmul_ub_bytes = _bytes(t.matmul_rows * r * ob)
    t.fifo_push_bytes = _bytes(t.fifo_push_beats * c * ob)
    t.fifo_pop_bytes = _bytes(t.fifo_pop_beats * c * ob)
    t.acc_read_bytes = _bytes(t.acc_read_rows * c * ab)
    t.acc_write_bytes = _bytes(t.acc_write_rows * c * ab)
    t.acc_rmw_bytes = _bytes(t.acc_rmw_rows * c * ab)
    return t
