"""Which of a run's artifacts are attachments of its reply (D90).

The model decides what leaves the run: a file it exported (``artifact.export``) or generated
(the media tools) is attached to the final reply. What the host captured on its own, an output
too large for the model (step 12), and what the user uploaded are not: the first is
bookkeeping, the second is already the user's.
"""

from __future__ import annotations

from toolhost._model.artifacts import ArtifactOrigin, ArtifactRef
from toolhost._ports.artifacts import ArtifactStore

__all__ = ["ATTACHED_ORIGINS", "attachments_of"]

ATTACHED_ORIGINS = frozenset({ArtifactOrigin.EXPORT, ArtifactOrigin.MODEL_OUTPUT})


def attachments_of(store: ArtifactStore, run_id: str) -> tuple[ArtifactRef, ...]:
    """The run's attachments, in the order the run made them (the store's run order)."""
    return tuple(record.ref for record in store.list_run(run_id)
                 if record.origin in ATTACHED_ORIGINS)
