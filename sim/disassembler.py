"""One line of text per instruction word, from the ISA table (``hdl.isa.OPS``)."""

from tpugen.hdl import isa

__all__ = ["disassemble"]


def disassemble(word: int) -> str:
    """One line of text for an instruction word: the op's name (``OP<n>`` for an opcode not in
    ``isa.Op``), the fields it uses (``isa.OpSpec.fields``), the fields it ignores when they are
    not 0, and its flags (the ones it uses by name, other bits in hex)."""
    f = isa.decode(word)
    op = f["op"]
    spec = isa.OPS.get(op)
    body = [b.name for b in isa.body_fields(op)]
    used = body if spec is None else spec.fields
    words = [f"OP{op}" if spec is None else spec.op.name]
    words += [f"{k}={f[k]}" for k in body if k in used or f[k]]
    if spec is not None and any(a.field == "flags" for a in spec.accesses):
        return " ".join([*words, f"qset={f['flags']}"])    # the flags are a set number
    flags, names = f["flags"], []
    for name in () if spec is None else spec.flags:
        if flags & isa.Flag[name]:
            names.append(name)
            flags &= ~int(isa.Flag[name])
    if flags:
        names.append(f"{flags:#x}")
    if names:
        words.append("|".join(names))
    return " ".join(words)
