"""Data layouts of the core's ports, shared by the hardware, the testbenches and the backends,
and the widths of the buffer row numbers the control logic computes with."""

from amaranth.hdl import signed
from amaranth.lib import data

from tpugen.hdl.config import Config
from tpugen.hdl.isa import N_COUNTERS, Cause, Counter

__all__ = ["host_lanes", "host_lane_width", "host_in_layout", "host_out_layout", "STATUS_LAYOUT",
           "STATUS_COUNTERS",
           "ub_bits", "acc_bits"]


def host_lanes(config: Config) -> int:
    """Operand lanes of a host-in beat: max(R, C)."""
    return max(config.rows, config.cols)


def host_lane_width(config: Config) -> int:
    """Bits of one host-in lane: the operand width, at least 8 (READ_QUANT beats carry bytes).
    An operand takes the low ``operand_width`` bits of its lane (an int4 lane holds -8..7
    sign-extended; a float lane holds the operand's bit pattern)."""
    return max(8, config.operand_width)


def ub_bits(config: Config) -> int:
    """Bits of a unified-buffer row number or range end (0 .. ``ub_rows``)."""
    return config.ub_rows.bit_length()


def acc_bits(config: Config) -> int:
    """Bits of an accumulator row number or range end (0 .. ``acc_rows``)."""
    return config.acc_rows.bit_length()


def host_in_layout(config: Config) -> data.StructLayout:
    """A host-in beat: max(R, C) lanes of ``host_lane_width`` bits (R operands used by
    READ_HOST, C by READ_WEIGHTS, C bytes by READ_QUANT) and the ``last`` flag that ends each
    instruction's data."""
    return data.StructLayout({
        "data": data.ArrayLayout(signed(host_lane_width(config)), host_lanes(config)),
        "last": 1,
    })


def host_out_layout(config: Config) -> data.StructLayout:
    """A host-out beat: C lanes of ``acc_width`` (accumulator rows raw, unified-buffer rows
    sign-extended, or SYNC / counter words) and ``last`` on each instruction's final beat."""
    return data.StructLayout({
        "data": data.ArrayLayout(signed(config.acc_width), config.cols),
        "last": 1,
    })


#: The status port: busy, the sticky error and its cause, and the 64-bit counters, one field
#: per ``hdl.isa.Counter`` (in that order) named ``counter.name.lower()``.
STATUS_LAYOUT = data.StructLayout({
    "busy": 1,
    "error": 1,
    "cause": Cause.as_shape(),
    **{c.name.lower(): 64 for c in Counter},
})

_FIRST_COUNTER = STATUS_LAYOUT[Counter(0).name.lower()].offset
#: The bits of a status value that hold the counters, ``Counter`` order, 64 bits each.
STATUS_COUNTERS = slice(_FIRST_COUNTER, _FIRST_COUNTER + 64 * N_COUNTERS)
