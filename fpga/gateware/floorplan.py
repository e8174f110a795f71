"""Where the array's DSP blocks go on an ECP5: a floorplan that keeps neighbouring cells on
neighbouring ``MULT18X18D`` sites.

Left to itself, nextpnr scatters a large array's DSP cells over the device's DSP rows (a 16 x 16
array measured here: cells (0, 0) and (0, 1) 40 columns apart, the partial-sum chain of one
column across all three DSP rows), and the wiring between them congests the router. The
floorplan fixes each DSP cell's block (its ``BEL`` attribute, ``hdl.dsp.mult18x18d``):

  * The sites of one DSP row, in x order, hold ``k = len(row) // R`` array columns interleaved:
    cell ``(i, j)`` of the row's ``c``-th column (``c = j mod k``) is site ``k * i + c``. So a
    partial sum (``psum_width`` bits) hops ``k`` sites to the next row's cell, an activation
    (``operand_width`` bits) one site to the next column's cell, and a column's weight
    broadcast stays in one DSP row.
  * Columns ``0 .. k - 1`` use the first DSP row, ``k .. 2k - 1`` the second, and so on: the
    activation hop from a DSP row's last column to the next row's first keeps its x.
  * Whole columns only, as many as the DSP budget and the rows hold; the cells of the other
    columns are Booth multipliers in LUTs, placed by nextpnr.

``MULT18_ROWS`` has the sites per device, read off nextpnr-ecp5's placements of this project's
builds (the BEL names it gives ``MULT18X18D`` cells).
"""

from __future__ import annotations

from tpugen.hdl.config import Config, check_config

__all__ = ["MULT18_ROWS", "ecp5_mult18_rows", "array_floorplan"]


def ecp5_mult18_rows(rows, blocks) -> tuple[tuple[str, ...], ...]:
    """The ``MULT18X18D`` BEL names of an ECP5's DSP rows (y coordinates ``rows``), each in x
    order: a DSP block at column ``x`` holds ``MULT18_0`` at ``x``, ``MULT18_1`` at ``x + 1``,
    ``MULT18_4`` at ``x + 4`` and ``MULT18_5`` at ``x + 5`` (``blocks``: the blocks' x)."""
    return tuple(tuple(f"X{x + dx}/Y{y}/MULT18_{k}" for x in blocks
                       for dx, k in ((0, 0), (1, 1), (4, 4), (5, 5)))
                 for y in rows)


#: The MULT18X18D sites of each ECP5 device the boards use, DSP row by DSP row.
MULT18_ROWS = {
    # LFE5U-85F (ULX3S): three DSP rows of 13 blocks, 156 sites.
    "LFE5U-85F": ecp5_mult18_rows((10, 34, 58),
                                  (4, 13, 22, 31, 40, 49, 58, 69, 78, 87, 96, 105, 114)),
}


def array_floorplan(config: Config, rows, blocks: int) -> tuple[dict, dict] | None:
    """The DSP plan and sites of the floorplan above: ``(plan, sites)`` with ``plan`` an
    ``hdl.dsp.dsp_plan`` (``{(i, j): "mult18"}``) of at most ``blocks`` cells and ``sites``
    ``{(i, j): BEL}``; ``None`` when no DSP row holds a whole column (R larger than a row),
    the array's pipelined cell is off (``cell_pipeline != 2``) or the operands are floats."""
    check_config(config)
    if isinstance(blocks, bool) or not isinstance(blocks, int) or blocks < 0:
        raise ValueError(f"blocks must be a non-negative integer, not {blocks!r}")
    r, c = config.rows, config.cols
    if config.cell_pipeline != 2 or config.operand_type.is_float or not rows:
        return None
    per_row = min(len(row) for row in rows) // r
    if per_row == 0:
        return None
    columns = min(c, blocks // r, per_row * len(rows))
    plan, sites = {}, {}
    for j in range(columns):
        row, slot = rows[j // per_row], j % per_row
        for i in range(r):
            plan[(i, j)] = "mult18"
            sites[(i, j)] = row[per_row * i + slot]
    return plan, sites
