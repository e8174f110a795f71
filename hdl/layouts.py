"""Data layouts of the core's ports, shared by the hardware, the testbenches and the backends,
and the widths of the buffer row numbers the control logic computes with."""

from amaranth.hdl import signed
from amaranth.lib import data

from .config import Config

__all__ = ["host_lanes", "host_in_layout", "host_out_layout", "STATUS_LAYOUT", "ub_bits",
           "acc_bits"]


def host_lanes(config: Config) -> int:
    """Operand lanes of a host-in beat: max(R, C)."""
    return max(config.rows, config.cols)


def ub_bits(config: Config) -> int:
    """Bits of a unified-buffer row number or range end (0 .. ``ub_rows``)."""
    return config.ub_rows.bit_length()


def acc_bits(config: Config) -> int:
    """Bits of an accumulator row number or range end (0 .. ``acc_rows``)."""
    return config.acc_rows.bit_length()


def host_in_layout(config: Config) -> data.StructLayout:
    """A host-in beat: max(R, C) operand lanes (R used by READ_HOST, C by READ_WEIGHTS) and the
    ``last`` flag that ends each instruction's data."""
    return data.StructLayout({
        "data": data.ArrayLayout(signed(config.operand_width), host_lanes(config)),
        "last": 1,
    })


def host_out_layout(config: Config) -> data.StructLayout:
    """A host-out beat: C lanes of ``acc_width`` (accumulator rows raw, unified-buffer rows
    sign-extended, or SYNC / counter words) and ``last`` on each instruction's final beat."""
    return data.StructLayout({
        "data": data.ArrayLayout(signed(config.acc_width), config.cols),
        "last": 1,
    })


#: The status port: busy, the sticky error and its cause, and the 64-bit counters
#: (``hdl.isa.Counter`` order).
STATUS_LAYOUT = data.StructLayout({
    "busy": 1,
    "error": 1,
    "cause": 4,
    "cycles": 64,
    "array_busy": 64,
    "host_in_stall": 64,
    "host_out_stall": 64,
    "retired": 64,
})
