"""D160's "latest", the one order the email tools read mail in: a Date more than a day past
the clock ranks below every plausible one (a sender can forge its Date, not the host's clock),
and undated mail below both. email.context asks it of SQLite (one range query per rank);
the census sorts its rows with ``rank``."""

from __future__ import annotations

import datetime as _dt
from typing import Final

__all__ = ["SKEW_S", "horizon", "rank"]

#: The clock skew tolerated before a Date counts as forged.
SKEW_S: Final = 86400


def horizon(now: _dt.datetime) -> int:
    """The latest ``date_ts`` (epoch seconds) that still ranks as plausible at ``now``."""
    return int(now.timestamp()) + SKEW_S


def rank(date_ts: int | None, horizon: int | None) -> tuple[int, int]:
    """A sort key of D160's order, oldest first: undated, then dated past ``horizon`` (None:
    no clock, every date is plausible), then plausible, each by its date."""
    if date_ts is None:
        return (0, 0)
    return (1 if horizon is not None and date_ts > horizon else 2, date_ts)
