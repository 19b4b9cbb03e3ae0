#!/usr/bin/python3
"""Write the type stubs python/fccl/__init__.pyi and
python/fccl/torch/__init__.pyi from the built package's public names and
signatures (run after `make`; PYTHONPATH=build/python).  Parameters and
returns are typed Any where the code does not say more: the stubs give
editors and type checkers the names, arity and keywords.

    PYTHONPATH=build/python /usr/bin/python3 scripts/gen-stubs.py
"""
import inspect
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def sig_text(obj):
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return "(*args: Any, **kwargs: Any)"
    parts, star = [], False
    for p in sig.parameters.values():
        name = p.name
        if p.kind == p.VAR_POSITIONAL:
            parts.append(f"*{name}: Any")
            star = True
            continue
        if p.kind == p.VAR_KEYWORD:
            parts.append(f"**{name}: Any")
            continue
        if p.kind == p.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        if p.kind == p.POSITIONAL_ONLY:
            name = name  # stubs keep the name; callers pass positionally
        default = "" if p.default is p.empty else " = ..."
        ann = "Any" if name not in ("self", "cls") else None
        parts.append(f"{name}: {ann}{default}" if ann else name)
    return "(" + ", ".join(parts) + ")"


# Public methods a class has from a C++ base, which inspect cannot read:
# fccl.torch's hot collectives (ProcessGroupCpp, python/fccl/torch/_work.cpp).
FROM_CPP = {
    "ProcessGroupFccl": {
        "allreduce": lambda tensors, opts=None: None,
        "broadcast": lambda tensors, opts=None: None,
    },
}


def stub_class(name, cls):
    lines = [f"class {name}:"]
    body = []
    members = dict(vars(cls))
    for attr, fn in FROM_CPP.get(name, {}).items():
        members.setdefault(attr, fn)
    for attr, val in sorted(members.items()):
        if attr.startswith("_") and attr != "__init__":
            continue
        if callable(val) or isinstance(val, (staticmethod, classmethod)):
            fn = val.__func__ if isinstance(val, (staticmethod,
                                                  classmethod)) else val
            text = sig_text(fn)
            if isinstance(val, staticmethod):
                body.append("    @staticmethod")
            elif isinstance(val, classmethod):
                body.append("    @classmethod")
            elif not text.startswith("(self"):
                text = "(self, " + text[1:] if text != "()" else "(self)"
            ret = "None" if attr == "__init__" else "Any"
            body.append(f"    def {attr}{text} -> {ret}: ...")
        else:
            body.append(f"    {attr}: Any")
    return lines + (body or ["    ..."])


def stub_module(mod, names, header):
    out = [header, "from typing import Any", ""]
    for n in sorted(names):
        obj = getattr(mod, n)
        if inspect.isclass(obj):
            if issubclass(obj, BaseException):
                out.append(f"class {n}(Exception): ...")
            else:
                out += stub_class(n, obj)
        elif callable(obj):
            out.append(f"def {n}{sig_text(obj)} -> Any: ...")
        elif inspect.ismodule(obj):
            continue
        else:
            out.append(f"{n}: {type(obj).__name__}")
        out.append("")
    out.append(f"__all__ = {sorted(names)!r}")
    return "\n".join(out).rstrip() + "\n"


def main():
    import fccl
    import fccl.torch
    head = ('"""Type stubs of {}, written by scripts/gen-stubs.py from the '
            'built package."""')
    for mod, path in ((fccl, "python/fccl/__init__.pyi"),
                      (fccl.torch, "python/fccl/torch/__init__.pyi")):
        names = [n for n in getattr(mod, "__all__") if hasattr(mod, n)]
        text = stub_module(mod, names, head.format(mod.__name__))
        with open(os.path.join(ROOT, path), "w") as f:
            f.write(text)
        print("wrote", path, len(names), "names", file=sys.stderr)


if __name__ == "__main__":
    main()
