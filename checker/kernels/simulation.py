"""The random choices of simulation (``checker/explore/simulate.py``): which successor each
behaviour takes, from counter-based random numbers.

A behaviour's every random number is a hash of (seed, behaviour number, step, purpose), not a
draw from a generator shared by the threads: behaviour b of seed s is the same sequence of states
whatever the thread count, the batch it ran in, or the tier (interpreted or compiled) that
computed its successors. Its readable reference is ``tests/simulation_reference.py``;
``tests/test_simulate.py`` compares the two.
"""

from __future__ import annotations

import numpy as np
from numba import njit, uint64

from kraftcheck.checker.kernels.hashing import mix64

# what a random number is for (the "purpose" hashed with the seed, behaviour and step)
PICK_SUCCESSOR = 1
PICK_INITIAL = 2
PICK_SWARM = 3
PICK_ACTION = 4


@njit(cache=True, inline="always")
def random_word(seed, behaviour, step, purpose):
    """A 64-bit random number, a hash of its four arguments (splitmix64's finaliser, chained)."""
    h = mix64(uint64(seed) ^ uint64(0x9E3779B97F4A7C15))
    h = mix64(h ^ uint64(behaviour))
    h = mix64(h ^ uint64(step))
    return mix64(h ^ uint64(purpose))


@njit(cache=True)
def below(word, n):
    """``word`` mapped to 0..n-1 by the high half of a 64x64 product (Lemire's reduction without
    the rejection step: the bias is below n / 2^32 for the n here)."""
    return int((word >> uint64(32)) * uint64(n) >> uint64(32))


@njit(cache=True, nogil=True)
def choose_successors(labels, words, sources, props, blocked, label_action, action_on, stride, first, nwalkers,
                      no_label, seed, behaviours, steps, by_action, chosen, moved):
    """For each walker ``first`` <= i < ``nwalkers`` (its state ``sources[i]``, its candidate rows ``i * stride
    .. i * stride + stride - 1``): ``chosen[i]``, the row it takes, or -1 if it has none;
    ``moved[i]``, 1 if some successor differs from the state (else the state deadlocks, TLC's
    definition).

    A candidate is a row whose label is not ``no_label``, whose successor differs from the state
    (a self-loop leads nowhere new), whose transition mask has no bit of ``blocked`` (an action
    constraint it breaks; ``props`` of length 1 means no masks) and whose action is on for the
    walker (``action_on[i, label_action[label]]``: swarm runs switch some off).

    Without ``by_action`` the pick is uniform among the candidates, by ``random_word(seed,
    behaviours[i], steps[i], PICK_SUCCESSOR)``. With it, first an action uniformly among those
    with a candidate (by the word of purpose PICK_ACTION), then uniformly among that action's
    candidates (PICK_SUCCESSOR): an action with many instances (an ISR shrink per subset of
    followers) no longer crowds out one with few (a produce, a fetch).

    One pass over a walker's rows gathers its candidates (in row order), and the pick is made
    among them: most rows of a model with many actions hold no successor. A walker's pick
    depends on nothing but its own rows, so the walkers may be split among threads (``first``).
    """
    with_props = props.shape[0] > 1
    nactions = action_on.shape[1]
    nwords = words.shape[1]
    per_action = np.zeros(nactions, np.int64)
    candidates = np.empty(stride, np.int64)
    for i in range(first, nwalkers):
        count = np.int64(0)  # not the literal 0: numba would compile below() for it as well
        moved[i] = 0
        for r in range(i * stride, i * stride + stride):
            lab = labels[r]
            if lab == no_label:
                continue
            same = True
            for w in range(nwords):
                if words[r, w] != sources[i, w]:
                    same = False
                    break
            if same:  # a self-loop leads nowhere new
                continue
            moved[i] = 1
            if (with_props and props[r] & blocked) or action_on[i, label_action[lab]] == 0:
                continue
            candidates[count] = r
            count += 1
        if count == 0:
            chosen[i] = -1
            continue
        if not by_action:
            chosen[i] = candidates[below(random_word(seed, behaviours[i], steps[i], PICK_SUCCESSOR), count)]
            continue
        for a in range(nactions):
            per_action[a] = 0
        kinds = np.int64(0)
        for c in range(count):
            a = label_action[labels[candidates[c]]]
            if per_action[a] == 0:
                kinds += 1
            per_action[a] += 1
        k = below(random_word(seed, behaviours[i], steps[i], PICK_ACTION), kinds)
        action = -1
        for a in range(nactions):
            if per_action[a]:
                if k == 0:
                    action = a
                    break
                k -= 1
        k = below(random_word(seed, behaviours[i], steps[i], PICK_SUCCESSOR), per_action[action])
        for c in range(count):
            if label_action[labels[candidates[c]]] == action:
                if k == 0:
                    chosen[i] = candidates[c]
                    break
                k -= 1


# why a behaviour ends (a simulation report's "ends"), by the code ``take_steps`` gives it; GOES: it goes on
ENDS = ("", "depth", "deadlock", "constraint", "no successor", "violation", "cut short")
GOES, END_DEPTH, END_DEADLOCK, END_CONSTRAINT, END_NO_SUCCESSOR, END_VIOLATION, END_CUT_SHORT = range(len(ENDS))


@njit(cache=True, nogil=True)
def take_steps(n, chosen, moved, behaviours, stop_at, words, rows, nrows, masks, constraint_bits, stride,
               label_action, depth, steps, path_labels, paths, cur, taken, why):
    """Walkers 0..n-1 take the successors they picked (``chosen[i]``, a row of ``words``; the
    step's rows with a successor are ``rows[:nrows]``, ascending, with their invariant and
    constraint masks in ``masks``), or end; ``why[i]``: GOES, or the code of why its behaviour
    ends here (its state counted, not left). The lowest-numbered violating behaviour so far is
    ``stop_at`` (-1: none), which ends, and every later one with it ("cut short"); a walker whose
    state has no successor but itself deadlocks, one with no candidate has "no successor". A
    walker that steps writes the label and the successor into its path (``path_labels``,
    ``paths``), ``cur`` and ``steps``, counts its action in ``taken``, and ends if the successor
    breaks a state constraint (bits ``constraint_bits`` of its mask) or its behaviour reaches
    ``depth`` states."""
    nwords = words.shape[1]
    listed = rows[:nrows]
    for i in range(n):
        end = GOES
        if stop_at >= 0 and behaviours[i] >= stop_at:
            end = END_VIOLATION if behaviours[i] == stop_at else END_CUT_SHORT
        elif moved[i] == 0:
            end = END_DEADLOCK
        elif chosen[i] < 0:
            end = END_NO_SUCCESSOR
        else:
            r = chosen[i]
            s = steps[i] + 1
            label = r % stride
            path_labels[i, s - 1] = label
            for k in range(nwords):
                paths[i, s, k] = words[r, k]
                cur[i, k] = words[r, k]
            steps[i] = s
            taken[label_action[label]] += 1
            if masks[np.searchsorted(listed, r)] & constraint_bits:  # a chosen row is among the listed
                end = END_CONSTRAINT
            elif s + 1 >= depth:
                end = END_DEPTH
        why[i] = end


@njit(cache=True)
def behaviour_starts(seed, behaviours, ninitial, swarm, action_on, initial):
    """For new behaviours ``behaviours``: the initial state each starts from (``initial[j]``,
    uniformly among ``ninitial``) and, with ``swarm``, the actions it may take (``action_on[j]``:
    each on with probability 1/2, at least one on); without, every action on."""
    nactions = action_on.shape[1]
    for j in range(behaviours.shape[0]):
        b = behaviours[j]
        initial[j] = below(random_word(seed, b, 0, PICK_INITIAL), ninitial)
        if not swarm:
            for a in range(nactions):
                action_on[j, a] = 1
            continue
        any_on = False
        for a in range(nactions):
            on = (random_word(seed, b, a, PICK_SWARM) >> uint64(63)) == uint64(1)
            action_on[j, a] = 1 if on else 0
            any_on = any_on or on
        if not any_on:
            action_on[j, below(random_word(seed, b, nactions, PICK_SWARM), nactions)] = 1


def warm_up() -> None:
    """Compile (or load) these kernels once, on a tiny input."""
    words = np.zeros((2, 1), np.uint64)
    words[1, 0] = 1
    labels = np.array([0, 65535], np.uint16)
    chosen = np.zeros(1, np.int64)
    moved = np.zeros(1, np.uint8)
    # the argument types simulate.py passes (the seed a uint64): the signature a run uses is compiled
    choose_successors(labels, words, np.zeros((1, 1), np.uint64), np.zeros(1, np.uint64), np.uint64(0),
                      np.zeros(1, np.int64), np.ones((1, 1), np.uint8), 2, 0, 1, 65535, np.uint64(0),
                      np.zeros(1, np.int64), np.zeros(1, np.int64), True, chosen, moved)
    behaviour_starts(0, np.zeros(1, np.int64), 1, True, np.ones((1, 1), np.uint8), np.zeros(1, np.int64))
