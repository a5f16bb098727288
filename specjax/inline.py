"""A CPU client of specjax's own that runs each call inline, for the programs called once per point (`api.point`).

JAX's CPU client hands each call of a compiled program that is not trivial to a worker thread and the caller
waits for the answer (`jax_cpu_enable_async_dispatch`, on by default); for one operating point that hand-off
and wait is most of the call (about 40 us of it on this 2-core machine against 10-13 us run inline,
bench/README.md). The flag is process-wide and read once, when JAX's backend starts, and a library must not
change its user's JAX configuration. So specjax makes a second CPU client of its own,
`jaxlib.xla_client.make_cpu_client(asynchronous=False)` (JAX's own constructor of its CPU client, with
async dispatch off), and `store` compiles or loads onto it the entry points marked `inline` (`store.jit(...,
inline=True)`) whose inputs are all host arrays. Their outputs are read back into NumPy at once
(`store.Program.run`), so no array of this client reaches the caller; JAX's default client, its
configuration and every other program are untouched.

It is the same XLA CPU compilation for the same processor, loaded on another client: the same bits
(tests/test_inline.py compares every output with the program on JAX's default client and with a one-row
`api.points`). Used only where JAX's default backend is the CPU (elsewhere the programs stay on the default
device); `SPECJAX_INLINE=0` in the environment, or `enable(False)`, turns it off. Where the client cannot be
made, or a program cannot be compiled or loaded onto it (another jax or jaxlib), it is not used again in the
process (`refused()` says why) and every program runs on JAX's default client as before.
"""

import os
import threading

ENV = "SPECJAX_INLINE"
_OFF = ("0", "off", "false", "no")

_lock = threading.Lock()
_client = None   # the client once made
_failed = None   # why it is not used (making it, or compiling or loading onto it, failed once): not tried again
_on = None       # enable()'s setting; None: the environment's


def enable(on=True):
    """Run (True) or not (False) the programs marked inline on the inline client from the next call on (each
    entry point keeps one program per setting in memory); None: the environment's setting again."""
    global _on
    _on = None if on is None else bool(on)


def enabled():
    """Whether programs marked inline go to the inline client (`enable`, else `SPECJAX_INLINE` as it was at
    the first call, default on)."""
    global _on
    if _on is None:
        _on = os.environ.get(ENV, "1").strip().lower() not in _OFF
    return _on


def client():
    """The inline client (made on first use), or None where it is off, where JAX's default backend is not
    the CPU, or where it cannot be made."""
    global _client, _failed
    if not enabled() or _failed:
        return None
    if _client is None:
        import jax

        if jax.default_backend() != "cpu":
            return None
        with _lock:
            if _client is None and not _failed:
                try:
                    from jaxlib import xla_client

                    _client = xla_client.make_cpu_client(asynchronous=False)
                except Exception as e:  # noqa: BLE001  (another jaxlib: the default client serves, as before)
                    _failed = f"making it failed ({type(e).__name__}: {e})"
                    return None
    return _client


def refuse(why):
    """Stop using the inline client in this process (`store` calls this where compiling or loading onto it
    failed and JAX's default client did not: the answers are the same there, only slower)."""
    global _failed
    _failed = why


def refused():
    """Why the inline client is not used in this process (a sentence), or None."""
    return _failed


def device():
    """The inline client's device, or None (see `client`)."""
    c = client()
    return None if c is None else c.devices()[0]
