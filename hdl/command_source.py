"""The command source: the program memory and the model tag in front of the controller.

``CommandSource`` passes the command stream to the controller and carries out the PROGRAM op
(``hdl.isa``) on its way: STORE keeps the next n command words in the program memory instead of
passing them on, CALL passes program-memory words on in place of the command stream, SET_TAG and
CHECK_TAG set and compare the model tag. The PROGRAM words themselves go on to the controller,
which counts them (and drops them with their cause: OUT_OF_RANGE, BAD_PROGRAM, WRONG_MODEL).
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from tpugen.hdl.config import Config, check_config
from tpugen.hdl.isa import INSTR_BITS, INSTR_LAYOUT, Flag, Op

__all__ = ["CommandSource", "TAG_BITS"]

#: Bits of the model tag: the whole body of a PROGRAM word (src, dst, n, part).
TAG_BITS = 56


class CommandSource(wiring.Component):
    """The command stream, with the PROGRAM op's program memory and tag.

    Ports:
      i   ``In(stream(INSTR_LAYOUT))``: the core's command stream.
      o   ``Out(stream(INSTR_LAYOUT))``: to the controller.
      busy  ``Out(1)``: a CALL's words are being passed on (a STORE waiting for its words is
          not busy: like an engine waiting for host-in data, it waits for the host).

    Timing: outside a STORE or a CALL, ``o`` is ``i`` (no register between: ``i.ready`` is
    ``o.ready``), but for the flags it sets. STORE (valid: ``dst + n <= program_words`` and
    neither NESTED nor MISMATCH set): the word goes on, then the next n words of ``i`` are taken,
    one a cycle, and written to words ``dst..`` (not passed on; a STORE that is not valid takes
    them too and writes none). CALL (valid: ``0 < n``, ``src + n <= program_words``, no NESTED or
    MISMATCH): the word goes on, then words ``src..src+n-1`` are passed on, ``i`` waiting
    meanwhile: the first is offered two cycles after the CALL went on, each next one the cycle
    after the one before went (one a cycle while ``o.ready`` stays high), from a register (the
    read port's data goes through a register before any logic; a stalled word waits there). A
    CALL or STORE word read from the memory goes on with NESTED set (so it is dropped) and does
    nothing else. SET_TAG (TAG and STORE) sets the tag to the word's body when it goes on
    (from either source); CHECK_TAG (TAG) goes on with MISMATCH set when its body differs from
    the tag; after such a failed check, CALLs go on with MISMATCH set and run nothing (so a
    stale model never computes) until a SET_TAG or a CHECK_TAG that passes. The tag is 0 after
    reset (and no check has failed); the memory keeps its words (``program_words`` of them).
    With ``program_words == 0`` it is a wire (every PROGRAM word is OUT_OF_RANGE, ``hdl.isa``).
    """

    def __init__(self, config: Config):
        self.config = check_config(config)
        super().__init__({
            "i": In(stream.Signature(INSTR_LAYOUT)),
            "o": Out(stream.Signature(INSTR_LAYOUT)),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        words = self.config.program_words
        if not words:        # no program memory, no tag: every PROGRAM word is OUT_OF_RANGE
            wiring.connect(m, wiring.flipped(self.i), wiring.flipped(self.o))
            return m
        aw = max(1, words.bit_length())
        tag = Signal(TAG_BITS)
        refused = Signal()                 # a CHECK_TAG failed: CALLs are dropped
        storing = Signal()                 # taking a STORE's words
        calling = Signal()                 # passing a CALL's words on
        left = Signal(16)                  # words the STORE takes or the CALL still reads
        at = Signal(17)                    # STORE: the next word's address; CALL: the next read
        store_ok = Signal()                # the STORE is valid: its words are written
        # A CALL's words go through two registers, so that no logic follows the block RAM's
        # read (its clock-to-output is nearly half of a cycle at the ULX3S's clock): the read
        # port's own data register (``on_port``: it holds a word to pass on) and ``fetched``
        # (``offered``: the word on ``o``). Both move on together while ``o`` can take a word.
        on_port, offered = Signal(), Signal()
        fetched = Signal(INSTR_LAYOUT)
        word = Signal(INSTR_LAYOUT)        # the word offered on ``o``, before its flags change
        out = Signal(INSTR_LAYOUT)
        move = ~offered | self.o.ready

        m.submodules.pmem = pmem = Memory(shape=INSTR_BITS, depth=words, init=[])
        wr, rd = pmem.write_port(), pmem.read_port()
        issue = calling & (left != 0) & move
        m.d.comb += [
            wr.en.eq(storing & self.i.valid & store_ok & (at < words)),
            wr.addr.eq(at[:aw]), wr.data.eq(self.i.payload.as_value()),
            # Outside a CALL the port reads the word at the incoming word's src, so that a CALL
            # finds its first word on the port the cycle after it goes on (the read has no
            # other effect). A stalled word stays on the port, its enable low.
            rd.en.eq(move), rd.addr.eq(Mux(calling, at, self.i.payload.body.mem.src)[:aw]),
            word.eq(Mux(calling, fetched, self.i.payload)),
        ]
        with m.If(move):
            m.d.sync += fetched.eq(rd.data)
        with m.If(calling & move):
            m.d.sync += [offered.eq(on_port), on_port.eq(issue)]
        with m.If(issue):
            m.d.sync += [at.eq(at + 1), left.eq(left - 1)]
        with m.If(calling & move & (left == 0) & ~on_port):
            m.d.sync += calling.eq(0)

        mem = word.body.mem
        flags = word.flags
        body = Cat(mem.src, mem.dst, mem.n, mem.part)
        program = word.op == Op.PROGRAM
        kind = flags & (Flag.STORE | Flag.TAG)
        clean = (flags & (Flag.NESTED | Flag.MISMATCH)) == 0
        is_store, is_call = program & (kind == Flag.STORE), program & (kind == 0)
        is_set = program & (kind == (Flag.STORE | Flag.TAG))
        is_check = program & (kind == Flag.TAG)
        m.d.comb += out.eq(word)
        with m.If(is_check & (body != tag) | ~calling & is_call & refused):
            m.d.comb += out.flags.eq(flags | Flag.MISMATCH)
        with m.If(calling & (is_store | is_call)):
            m.d.comb += out.flags.eq(flags | Flag.NESTED)
        m.d.comb += [self.o.payload.eq(out), self.o.valid.eq(offered), self.i.ready.eq(storing),
                     self.busy.eq(calling)]
        with m.If(~calling & ~storing):
            m.d.comb += [self.o.valid.eq(self.i.valid), self.i.ready.eq(self.o.ready)]
            # Between STOREs and CALLs the address and count follow the incoming word (they
            # are only used after one goes on), so that no decode lies in front of them.
            store_kind = (flags & Flag.STORE).bool()
            m.d.sync += [at.eq(Mux(store_kind, mem.dst, mem.src + 1)),
                         left.eq(Mux(store_kind, mem.n, mem.n - 1))]

        sent = self.o.valid & self.o.ready
        with m.If(sent & is_set & clean):
            m.d.sync += [tag.eq(body), refused.eq(0)]
        with m.If(sent & is_check & clean):
            m.d.sync += refused.eq(body != tag)
        with m.If(storing & self.i.valid):
            m.d.sync += [at.eq(at + 1), left.eq(left - 1), storing.eq(left != 1)]
        with m.If(sent & ~calling & is_store & (mem.n != 0)):
            m.d.sync += [storing.eq(1), store_ok.eq(clean & (mem.dst + mem.n <= words))]
        with m.If(sent & ~calling & is_call & clean & ~refused & (mem.n != 0)
                  & (mem.src + mem.n <= words)):
            # the first word is on the read port next cycle (read at src this cycle)
            m.d.sync += [calling.eq(1), on_port.eq(1)]
        return m
