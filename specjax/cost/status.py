"""Statuses, declared once (docs/model.md §6, §7, §10 and §11), each with its words (as diffrax's
`RESULTS` keeps one message per code).

Inside jitted kernels a status is a small integer code (`int8`); files carry it as a polars Enum
of the names below and JSON as the name. No other module spells a status name or its sentence:
kernels use the members (`Point.OK`), writers use `names()` and `decode()`, readers `of()`, and text
asks the member (`Curve.STOPS_PAYING.text("over_rate", switch_off_qps="4.2")`).
"""

import enum

import numpy as np


class _Fields(dict):
    """Format fields: one not given reads "-" (a sentence never fails on a field its caller lacks)."""

    def __missing__(self, key):
        return "-"


class _Status(enum.IntEnum):
    """Base: an integer code with a string name (the lower-case member name) and its sentences.

    A member is declared as `NAME = code, message, *sentences`: `message` says what the status means;
    a type may name further sentences (`SENTENCES`), templates with {fields} of an answer."""

    SENTENCES = enum.nonmember(())

    def __new__(cls, code, message="", *sentences):
        member = int.__new__(cls, code)
        member._value_ = code
        member.message = message
        member.sentences = dict(zip(cls.SENTENCES, sentences))
        return member

    @property
    def label(self):
        return self.name.lower()

    def text(self, which="message", **fields):
        """The sentence `which` ("message" or one of the type's `SENTENCES`) with `fields` filled in."""
        template = self.message if which == "message" else self.sentences.get(which, self.message)
        return template.format_map(_Fields(fields))

    @classmethod
    def names(cls):
        """Every status name in code order (the categories of the file column)."""
        return tuple(m.label for m in cls)

    @classmethod
    def of(cls, name):
        """The member of a status name (as files and JSON carry it)."""
        return cls[str(name).upper()]

    @classmethod
    def decode(cls, codes):
        """Names for an int array or scalar of codes (object array, or a str for a scalar). Codes are
        contiguous from 0 (checked below), so the name table is indexed by code."""
        if isinstance(codes, (int, np.integer)):  # one code: its member's name (the table's entry)
            return cls(int(codes)).label
        table = np.asarray(cls.names(), dtype=object)
        arr = np.asarray(codes).astype(np.int64)
        return table[arr] if arr.ndim else str(table[arr])


class Point(_Status):
    """Status of one operating point (docs/model.md §6)."""

    OK = 0, "fits in memory with the drafter"
    SD_OVER_MEMORY = 1, "fits only without the drafter"
    BASE_OVER_MEMORY = 2, "the batch does not fit even without the drafter"
    MODEL_DOES_NOT_FIT = 3, "the weights alone do not fit"
    INVALID_INPUT = 4, "the combination of inputs is not physical"


class Curve(_Status):
    """Status of a speedup curve S(B) on [1, batch bound] (docs/model.md §7), or of the TPOT ratio over request
    rates (docs/model.md §10).

    Sentences: `over_batch` (what `crossover` says, fields crossover_batch, batch_bound, pays_from,
    pays_to), `over_rate` (what `serve` says, fields switch_off_qps, first_crossing_qps), `tag` (a
    figure's legend where the curve has no switch-off rate) and `over_clients` (what `serve --concurrency`
    says, fields switch_off_concurrency, first_crossing_concurrency)."""

    SENTENCES = enum.nonmember(("over_batch", "over_rate", "tag", "over_clients"))

    STOPS_PAYING = (0, "S >= 1 at batch 1, S < 1 beyond the switch-off batch B_off",
                    "speculation stops paying at batch B_off = {crossover_batch}",
                    "speculation lowers TPOT up to {switch_off_qps} req/s (switch-off rate)", "",
                    "speculation lowers E2E up to {switch_off_concurrency} clients (switch-off concurrency)")
    HELPS_THROUGHOUT = (1, "S >= 1 on the whole range",
                        "speculation pays at every batch up to the bound {batch_bound}",
                        "speculation lowers TPOT at every sustainable rate", "pays at every sustainable rate",
                        "speculation lowers E2E at every concurrency")
    NEVER_HELPS = (2, "S < 1 on the whole range", "speculation never pays on [1, {batch_bound}]",
                   "speculation never lowers TPOT here", "never pays", "speculation never lowers E2E here")
    HURTS_AT_SMALL_BATCH = (3, "S < 1 at batch 1 but S >= 1 somewhere (pays_between says where)",
                            "speculation hurts at small batch and pays between {pays_from} and {pays_to}",
                            "speculation raises TPOT at low load; switch-off rate {switch_off_qps}", "",
                            "speculation raises E2E at one client; switch-off concurrency {switch_off_concurrency}")
    HELPS_WITH_DIPS = (4, "S >= 1 at batch 1 and at the bound, S < 1 in between (the dips)",
                       "speculation pays at batch 1 and at the bound {batch_bound}, with dips",
                       "speculation pays at low load and at capacity, not in between (first rate where it does "
                       "not: {first_crossing_qps})", "",
                       "speculation pays at one client and at capacity, not in between (first concurrency where "
                       "it does not: {first_crossing_concurrency})")
    INVALID_INPUT = 5, "the combination of inputs is not physical"
    SD_DOES_NOT_FIT = (6, "speculation cannot run: the drafter with the model and one sequence (its prompt's KV "
                       "cache included) does not fit in memory",
                       "speculation does not fit here: the model and the drafter with one sequence exceed memory",
                       "does not fit: one request (the weights, the drafter and its prompt's KV cache) exceeds memory "
                       "with speculation", "does not fit",
                       "does not fit: one request (the weights, the drafter and its prompt's KV cache) exceeds memory "
                       "with speculation")


class Serving(_Status):
    """Status of a serving load at one request rate (docs/model.md §10): which side sustains the rate."""

    OK = 0, "both plain decoding and speculation sustain the rate"
    SD_SATURATED = 1, "only plain decoding sustains the rate (speculation's queue grows)"
    BASE_SATURATED = 2, "only speculation sustains the rate"
    BOTH_SATURATED = 3, "neither side sustains the rate"
    SD_DOES_NOT_FIT = 4, "the drafter does not fit with one sequence"
    MODEL_DOES_NOT_FIT = 5, "the model does not fit with one sequence: its weights, or them and one request's KV"
    INVALID_INPUT = 6, "the combination of inputs is not physical"

    def side(self, speculative):
        """'ok' | 'saturated' | 'does_not_fit' | 'invalid_input' for one side of this status."""
        if self is Serving.INVALID_INPUT:
            return self.label
        if self is Serving.MODEL_DOES_NOT_FIT or (speculative and self is Serving.SD_DOES_NOT_FIT):
            return "does_not_fit"
        sat = (Serving.SD_SATURATED, Serving.BOTH_SATURATED) if speculative else \
            (Serving.BASE_SATURATED, Serving.BOTH_SATURATED)
        return "saturated" if self in sat else Serving.OK.label

    def sustains(self, speculative):
        """Whether this side (plain decoding, or speculation) serves the rate: its side word is ok."""
        return self.side(speculative) == Serving.OK.label


class Closed(_Status):
    """Status of a closed loop at one concurrency (docs/model.md §11): whose clients queue for a slot (the
    engine holds fewer requests than there are clients, so the excess waits: TTFT grows by the wait)."""

    OK = 0                      # both sides admit every client's request at once
    SD_QUEUED = 1               # with speculation the batch is at its cap and requests wait for a slot
    BASE_QUEUED = 2             # without speculation they wait
    BOTH_QUEUED = 3
    SD_DOES_NOT_FIT = 4         # the drafter does not fit with one sequence
    MODEL_DOES_NOT_FIT = 5
    INVALID_INPUT = 6

    def side(self, speculative):
        """'ok' | 'queued' | 'does_not_fit' | 'invalid_input' for one side of this status."""
        if self is Closed.INVALID_INPUT:
            return "invalid_input"
        if self is Closed.MODEL_DOES_NOT_FIT or (speculative and self is Closed.SD_DOES_NOT_FIT):
            return "does_not_fit"
        queued = (Closed.SD_QUEUED, Closed.BOTH_QUEUED) if speculative else (Closed.BASE_QUEUED, Closed.BOTH_QUEUED)
        return "queued" if self in queued else "ok"


def code(member, dtype=np.int8):
    """The integer code of a member, as a numpy scalar of `dtype` (for `jnp.where` in kernels)."""
    return dtype(int(member))


for _cls in (Point, Curve, Serving, Closed):
    assert [int(m) for m in _cls] == list(range(len(_cls))), _cls
