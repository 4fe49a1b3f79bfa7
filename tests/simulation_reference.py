"""Readable references of the simulation kernels (``checker/kernels/simulation.py``), in plain
Python integers; ``tests/test_simulate.py`` compares the two."""

from __future__ import annotations

from kraftcheck.checker.kernels.hashing import M64, mix64_reference
from kraftcheck.checker.kernels.simulation import PICK_ACTION, PICK_INITIAL, PICK_SUCCESSOR, PICK_SWARM


def random_word(seed: int, behaviour: int, step: int, purpose: int) -> int:
    h = mix64_reference((seed ^ 0x9E3779B97F4A7C15) & M64)
    h = mix64_reference(h ^ (behaviour & M64))
    h = mix64_reference(h ^ (step & M64))
    return mix64_reference(h ^ purpose)


def below(word: int, n: int) -> int:
    return ((word >> 32) * n) >> 32


def choose_successors(labels, words, sources, props, blocked, label_action, action_on, stride, nwalkers, no_label,
                      seed, behaviours, steps, by_action=False):
    """(chosen, moved) per walker, as the kernel computes them: uniform among the candidates, or
    (``by_action``) uniform among the candidates' actions, then among that action's candidates."""
    chosen, moved = [], []
    for i in range(nwalkers):
        source = [int(x) for x in sources[i]]
        successors = [r for r in range(i * stride, (i + 1) * stride)
                      if int(labels[r]) != no_label and [int(x) for x in words[r]] != source]
        candidates = [r for r in successors
                      if not (len(props) > 1 and int(props[r]) & int(blocked))
                      and action_on[i][label_action[int(labels[r])]]]
        moved.append(1 if successors else 0)
        if not candidates:
            chosen.append(-1)
            continue
        if by_action:
            actions = sorted({label_action[int(labels[r])] for r in candidates})
            word = random_word(int(seed), int(behaviours[i]), int(steps[i]), PICK_ACTION)
            action = actions[below(word, len(actions))]
            candidates = [r for r in candidates if label_action[int(labels[r])] == action]
        word = random_word(int(seed), int(behaviours[i]), int(steps[i]), PICK_SUCCESSOR)
        chosen.append(candidates[below(word, len(candidates))])
    return chosen, moved


def behaviour_starts(seed, behaviours, ninitial, swarm, nactions):
    """(initial state, actions on) per new behaviour, as the kernel computes them."""
    out = []
    for b in behaviours:
        initial = below(random_word(seed, b, 0, PICK_INITIAL), ninitial)
        if not swarm:
            on = [1] * nactions
        else:
            on = [int(random_word(seed, b, a, PICK_SWARM) >> 63) for a in range(nactions)]
            if not any(on):
                on[below(random_word(seed, b, nactions, PICK_SWARM), nactions)] = 1
        out.append((initial, on))
    return out


def take_steps(n, chosen, moved, behaviours, stop_at, words, rows, masks, constraint_bits, stride, label_action,
               depth, steps, path_labels, paths, cur, taken):
    """(why, steps, path_labels, paths, cur, taken) as the kernel leaves them, from copies: each
    walker ends (violation, cut short, deadlock, no successor, in that order of precedence) or
    steps, and then may end at a state constraint or at ``depth``."""
    from kraftcheck.checker.kernels.simulation import ENDS
    steps, path_labels, paths, cur, taken = (a.tolist() for a in (steps, path_labels, paths, cur, taken))
    mask_of = {int(r): int(m) for r, m in zip(rows, masks)}
    why = []
    for i in range(n):
        if stop_at >= 0 and behaviours[i] == stop_at:
            why.append(ENDS.index("violation"))
        elif stop_at >= 0 and behaviours[i] > stop_at:
            why.append(ENDS.index("cut short"))
        elif not moved[i]:
            why.append(ENDS.index("deadlock"))
        elif chosen[i] < 0:
            why.append(ENDS.index("no successor"))
        else:
            r = int(chosen[i])
            steps[i] += 1
            path_labels[i][steps[i] - 1] = r % stride
            paths[i][steps[i]] = [int(x) for x in words[r]]
            cur[i] = [int(x) for x in words[r]]
            taken[label_action[r % stride]] += 1
            if mask_of[r] & constraint_bits:
                why.append(ENDS.index("constraint"))
            elif steps[i] + 1 >= depth:
                why.append(ENDS.index("depth"))
            else:
                why.append(0)
    return why, steps, path_labels, paths, cur, taken
