# amaranth: UnusedElaboratable=no
"""UART receiver/transmitter: baud-timing checks, exact bit timing, loopback, line errors."""

import random

import pytest
from amaranth.hdl import Module
from amaranth.sim import Simulator

from tpugen.fpga.gateware.uart import MAX_TIMING_ERROR, UARTReceiver, UARTTransmitter, baud_timing
from tpugen.tb.linksim import UARTMonitor, uart_write
from tpugen.tb.uart_model import UartModel

# (clk_freq, baud): integral and fractional clocks per bit, small so that simulations are fast.
RATIOS = [(4e6, 1e6), (4.5e6, 1e6), (5.5e6, 1e6), (6.25e6, 1e6), (7.3e6, 1e6), (8e6, 1e6),
          (25e6, 3e6)]


def _ids(ratios):
    return [f"{c / b:.4g}cpb" for c, b in ratios]


# --- timing checks ----------------------------------------------------------------------------

@pytest.mark.parametrize("clk", [12e6, 24e6, 48e6, 25e6, 12_000_000])
def test_3mbaud_passes(clk):
    t = baud_timing(clk, 3_000_000)
    assert t.error <= MAX_TIMING_ERROR
    UARTReceiver(clk, 3e6)
    UARTTransmitter(clk, 3e6)


def test_3mbaud_from_10mhz_fails():
    for cls in (UARTReceiver, UARTTransmitter):
        with pytest.raises(ValueError, match=r"clk_freq 10000000 .*baud 3000000.*1\.579%"):
            cls(10e6, 3e6)


def test_error_values():
    # 4 clocks per bit: the receiver's sample is half a clock from the bit middle.
    assert baud_timing(12e6, 3e6).error == pytest.approx(0.5 / (9.5 * 4))
    # 3 clocks per bit can be sampled exactly in the middle.
    assert baud_timing(9e6, 3e6).error == 0
    # Common rates from the iCEBreaker's 12 MHz are far inside the limit.
    assert baud_timing(12e6, 115200).error < 0.001
    # Half a clock over 9.5 bits of 3.5 clocks is just above 1.5%.
    with pytest.raises(ValueError, match=r"1\.504%"):
        baud_timing(7e6, 2e6)


def test_boundaries_and_samples_model():
    t = baud_timing(4.5e6, 1e6)
    # Boundaries rounded to the nearest clock of k * 4.5, samples near (k + 0.5) * 4.5 - 0.5.
    assert t.tx_boundaries == (4, 9, 13, 18, 22, 27, 31, 36, 40, 45)
    assert t.rx_samples == (2, 6, 11, 15, 20, 24, 29, 33, 38, 42)
    assert baud_timing(12e6, 3e6).rx_samples == tuple(1 + 4 * k for k in range(10))


@pytest.mark.parametrize("kwargs, exc, text", [
    ({"clk_freq": 0, "baud": 1e6}, ValueError, "clk_freq"),
    ({"clk_freq": -12e6, "baud": 1e6}, ValueError, "clk_freq"),
    ({"clk_freq": float("nan"), "baud": 1e6}, ValueError, "clk_freq"),
    ({"clk_freq": "12e6", "baud": 1e6}, TypeError, "clk_freq"),
    ({"clk_freq": True, "baud": 1e6}, TypeError, "clk_freq"),
    ({"clk_freq": 12e6, "baud": 0}, ValueError, "baud"),
    ({"clk_freq": 12e6, "baud": None}, TypeError, "baud"),
    ({"clk_freq": 12e6, "baud": float("inf")}, ValueError, "baud"),
    ({"clk_freq": 5e6, "baud": 2e6}, ValueError, "at least 3"),
])
def test_argument_validation(kwargs, exc, text):
    for cls in (UARTReceiver, UARTTransmitter):
        with pytest.raises(exc, match=text):
            cls(**kwargs)


# --- the host-UART model (the far end of the line in every simulation) -------------------------

def test_host_uart_model_schedule():
    """8N1, LSB first, one bit-time of ``baud * (1 + rate_error)`` each; gaps, a bad stop bit,
    a long stop bit; the line is left idle."""
    uart = UartModel(1e6, rate_error=0.25)
    assert uart.bit == pytest.approx(0.8e-6)
    sched = uart.schedule(b"\x35\x80", gap_bits=2)
    levels = [level for level, _ in sched]
    assert levels == [0, 1, 0, 1, 0, 1, 1, 0, 0, 1, 1] + [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1] + [1]
    assert [t for _, t in sched] == pytest.approx(
        ([0.8e-6] * 10 + [1.6e-6]) * 2 + [0.0])
    bad = uart.schedule(b"\xff", bad_stop=True, stop_bits=1.5)
    assert bad[-2:] == [(0, pytest.approx(1.2e-6)), (1, 0.0)]
    with pytest.raises(ValueError, match="baud"):
        UartModel(0)
    with pytest.raises(ValueError, match="rate_error"):
        UartModel(1e6, rate_error=0.6)
    with pytest.raises(TypeError, match="data"):
        uart.schedule("text")
    with pytest.raises(ValueError, match="gap_bits"):
        uart.schedule(b"x", gap_bits=-1)


# --- simulation -------------------------------------------------------------------------------

def _run(top, clk, *benches, background=()):
    sim = Simulator(top)
    sim.add_clock(1 / clk)
    for b in benches:
        sim.add_testbench(b)
    for b in background:
        sim.add_testbench(b, background=True)
    sim.run()


@pytest.mark.parametrize("clk, baud", [(4.5e6, 1e6), (7.3e6, 1e6), (4e6, 1e6)],
                         ids=_ids([(4.5e6, 1e6), (7.3e6, 1e6), (4e6, 1e6)]))
def test_tx_bit_timing_is_exact(clk, baud):
    """The line's edges fall exactly on the model's boundaries, also for back-to-back bytes."""
    dut = UARTTransmitter(clk, baud)
    t = dut.timing
    edges = []

    async def bench(ctx):
        # 0x55 toggles the line at every boundary (start 0, 1, 0, ..., 0, stop 1).
        for _ in range(2):
            ctx.set(dut.i.valid, 1)
            ctx.set(dut.i.payload, 0x55)
            await ctx.tick().until(dut.i.ready)
        ctx.set(dut.i.valid, 0)
        await ctx.tick().until(~dut.busy)

    async def watch(ctx):
        prev, cycle = 1, 0
        async for _, _, v in ctx.tick().sample(dut.tx):
            cycle += 1
            if v != prev:
                edges.append(cycle)
                prev = v

    _run(dut, clk, bench, background=[watch])
    assert len(edges) == 20
    start = edges[0]
    rel = [e - start for e in edges]
    one = [0] + list(t.tx_boundaries[:9])             # the stop bit's end is not an edge
    assert rel[:10] == one
    frame = t.tx_boundaries[9]
    assert rel[10:] == [frame + b for b in one]         # the second byte starts at t_10


@pytest.mark.parametrize("clk, baud", RATIOS, ids=_ids(RATIOS))
def test_loopback(clk, baud):
    """Random bytes through transmitter -> receiver, back to back, checked by both the receiver
    and an independent line monitor."""
    rng = random.Random(int(clk) ^ int(baud))
    data = bytes(rng.randrange(256) for _ in range(24)) + b"\x00\xff\x55\xaa"
    m = Module()
    m.submodules.tx = tx = UARTTransmitter(clk, baud)
    m.submodules.rx = rx = UARTReceiver(clk, baud)
    m.d.comb += rx.rx.eq(tx.tx)
    got = bytearray()
    mon = UARTMonitor(tx.tx, baud)

    async def send(ctx):
        for b in data:
            ctx.set(tx.i.valid, 1)
            ctx.set(tx.i.payload, b)
            await ctx.tick().until(tx.i.ready)
        ctx.set(tx.i.valid, 0)
        await ctx.tick().until(~tx.busy)
        await ctx.tick().repeat(8)

    async def recv(ctx):
        ctx.set(rx.o.ready, 1)
        while True:
            await ctx.posedge(rx.o.valid)
            got.append(ctx.get(rx.o.payload))

    _run(m, clk, send, background=[recv, mon.run])
    assert bytes(got) == data
    assert bytes(mon.data) == data
    assert mon.errors == 0


@pytest.mark.parametrize("clk, baud, rate_error", [
    (4e6, 1e6, 0.0), (4e6, 1e6, 0.02), (4e6, 1e6, -0.02),
    (5.5e6, 1e6, 0.025), (5.5e6, 1e6, -0.025), (16e6, 1e6, 0.035), (16e6, 1e6, -0.035),
])
def test_rx_from_async_line(clk, baud, rate_error):
    """The receiver decodes a line whose edges fall between clock edges and whose rate is off."""
    rng = random.Random(7)
    data = bytes(rng.randrange(256) for _ in range(16))
    dut = UARTReceiver(clk, baud)
    got = bytearray()

    async def line(ctx):
        await ctx.delay(0.37 / clk + 3 / baud)
        await uart_write(ctx, dut.rx, data, baud, rate_error=rate_error)
        await ctx.delay(3 / baud)

    async def recv(ctx):
        ctx.set(dut.o.ready, 1)
        while True:
            await ctx.posedge(dut.o.valid)
            got.append(ctx.get(dut.o.payload))

    _run(dut, clk, line, background=[recv])
    assert bytes(got) == data


def test_rx_rejects_far_off_rate():
    """A line 10% fast is not decoded as the same bytes (the receiver really samples)."""
    clk, baud = 8e6, 1e6
    data = bytes(range(0x30, 0x40))
    dut = UARTReceiver(clk, baud)
    got = bytearray()

    async def line(ctx):
        await uart_write(ctx, dut.rx, data, baud, rate_error=0.10)
        await ctx.delay(3 / baud)

    async def recv(ctx):
        ctx.set(dut.o.ready, 1)
        while True:
            await ctx.posedge(dut.o.valid)
            got.append(ctx.get(dut.o.payload))

    _run(dut, clk, line, background=[recv])
    assert bytes(got) != data


def test_framing_error_and_recovery():
    """A 0 stop bit: a one-cycle framing_error pulse, sticky error, no byte; then bytes again."""
    clk, baud = 6e6, 1e6
    dut = UARTReceiver(clk, baud)
    got = bytearray()
    pulses = []

    async def line(ctx):
        ctx.set(dut.o.ready, 1)
        await uart_write(ctx, dut.rx, b"\x5a", baud)
        await uart_write(ctx, dut.rx, b"\xc3", baud, bad_stop=True)
        await ctx.delay(2 / baud)
        assert ctx.get(dut.error)
        await uart_write(ctx, dut.rx, b"\x42\x43", baud)
        await ctx.delay(2 / baud)
        assert ctx.get(dut.error)                      # sticky
        ctx.set(dut.clear, 1)
        await ctx.tick()
        ctx.set(dut.clear, 0)
        await ctx.tick()
        assert not ctx.get(dut.error)

    async def watch(ctx):
        cycle = 0
        async for _, _, fe, valid, payload in ctx.tick().sample(
                dut.framing_error, dut.o.valid, dut.o.payload):
            cycle += 1
            if fe:
                pulses.append(cycle)
            if valid:
                got.append(payload)

    _run(dut, clk, line, background=[watch])
    assert len(pulses) == 1
    assert bytes(got) == b"\x5a\x42\x43"


def test_break_is_one_error():
    """A line held low for many byte-times gives one framing error and no bytes."""
    clk, baud = 4e6, 1e6
    dut = UARTReceiver(clk, baud)
    events = []

    async def line(ctx):
        ctx.set(dut.o.ready, 1)
        ctx.set(dut.rx, 0)
        await ctx.delay(45 / baud)
        ctx.set(dut.rx, 1)
        await ctx.delay(3 / baud)
        await uart_write(ctx, dut.rx, b"\x99", baud)
        await ctx.delay(2 / baud)

    async def watch(ctx):
        async for _, _, fe, valid, payload in ctx.tick().sample(
                dut.framing_error, dut.o.valid, dut.o.payload):
            if fe:
                events.append("error")
            if valid:
                events.append(payload)

    _run(dut, clk, line, background=[watch])
    assert events == ["error", 0x99]


def test_glitch_is_ignored():
    """A low pulse shorter than half a bit is not a start bit."""
    clk, baud = 8e6, 1e6
    dut = UARTReceiver(clk, baud)
    got = bytearray()

    async def line(ctx):
        ctx.set(dut.o.ready, 1)
        ctx.set(dut.rx, 0)
        await ctx.delay(0.3 / baud)
        ctx.set(dut.rx, 1)
        await ctx.delay(12 / baud)
        await uart_write(ctx, dut.rx, b"\x17", baud)
        await ctx.delay(2 / baud)

    async def recv(ctx):
        while True:
            await ctx.posedge(dut.o.valid)
            got.append(ctx.get(dut.o.payload))

    _run(dut, clk, line, background=[recv])
    assert bytes(got) == b"\x17"


def test_overrun_drops_new_byte():
    """With o not ready, the first byte waits; the second is dropped with an overrun pulse."""
    clk, baud = 4e6, 1e6
    dut = UARTReceiver(clk, baud)
    overruns = []

    async def bench(ctx):
        await uart_write(ctx, dut.rx, b"\x11\x22", baud)
        await ctx.delay(2 / baud)
        assert ctx.get(dut.o.valid)
        assert ctx.get(dut.o.payload) == 0x11
        assert ctx.get(dut.error)
        ctx.set(dut.o.ready, 1)
        await ctx.tick()
        ctx.set(dut.o.ready, 0)
        await uart_write(ctx, dut.rx, b"\x33", baud)
        await ctx.delay(2 / baud)
        assert ctx.get(dut.o.payload) == 0x33

    async def watch(ctx):
        async for _, _, ov in ctx.tick().sample(dut.overrun):
            if ov:
                overruns.append(1)

    _run(dut, clk, bench, background=[watch])
    assert overruns == [1]
