"""Leader epochs along a log: a property Kafka's truncation relies on rather than a rule the KIPs state.

Not checked by the model (it is not in ``kafka_invariants``): without
``--accept-stale-fetch-responses`` it holds by construction of the actions, and tests use it to
show what that switch breaks.
"""

from __future__ import annotations

from numba import njit


@njit(cache=True)
def leader_epochs_increase_along_logs(s):
    """KIP-101 (leader epoch truncation) and KIP-595 ("the log matching property") find where a
    follower diverged by comparing leader epochs, which assumes the epochs of a log's entries never
    decrease from one offset to the next (``LeaderEpochFileCache`` drops entries that would break
    this). Every broker's log, running or not, holds no record after a record of a later epoch."""
    for b in range(len(s.log)):
        for r in range(len(s.rec_offset)):
            if not s.log[b] >> r & 1:
                continue
            for q in range(len(s.rec_offset)):
                if (s.log[b] >> q & 1 and s.rec_offset[q] > s.rec_offset[r]
                        and s.rec_epoch[q] < s.rec_epoch[r]):
                    return False
    return True
