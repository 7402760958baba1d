"""Out of memory, said as such: a failure caused by the process's memory limit is named with the
limit, and the advice is to raise it (a rerun under the same limit fails the same way)."""

from __future__ import annotations

import resource

# what running out of memory looks like once it has become an exception's text: Python's own,
# the dynamic loader's (a library that cannot be mapped), the C library's and C++'s
SIGNS = ("MemoryError", "failed to map segment", "Cannot allocate memory", "std::bad_alloc")


def out_of_memory(text: str) -> bool:
    """Whether a failure's text says the process ran out of memory."""
    return any(sign in text for sign in SIGNS)


def address_space_limit_mb() -> int | None:
    """The soft limit on this process's address space (``ulimit -v``) in MB; None when unlimited."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else soft // 2**20


def memory_advice() -> str:
    """What to do about it, naming the limit when there is one."""
    mb = address_space_limit_mb()
    where = f" under the address-space limit of {mb} MB (ulimit -v)" if mb is not None else ""
    return (f"out of memory{where}; a rerun under the same limit fails the same way: raise the limit "
            "or run fewer workers (executor.workers)")
