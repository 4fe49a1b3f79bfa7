"""A resource allocator (Stephan Merz's SimpleAllocator), as a kraftcheck spec file of a user's.

Written from the TLA+ Examples' ``specifications/allocator/SimpleAllocator.tla``: clients request
sets of resources, the allocator grants parts of requests from the resources nobody holds, and
clients return resources they hold. Its safety part only: ``ResourceMutex`` is the invariant
(``TypeInvariant`` holds by the fields' domains); the liveness properties of the module are not
translated. The module declares ``Symmetry == Permutations(Clients) \\cup Permutations(Resources)``:
clients are interchangeable and so are resources, two symmetry sets, which ``--symmetry`` reduces
by their product group. tests/test_symmetry.py compares the counts with TLC's and with the orbits
of the unreduced state graph. It is not registered:

    kraftcheck check --spec bench/specs/simple_allocator.py:SimpleAllocator --symmetry

Every state has a successor (a client holding nothing and owing nothing can request; one holding
resources can return them; with no resource held, a client with a request can be served), so
deadlock is checked, as TLC does by default.
"""

from __future__ import annotations

from dataclasses import dataclass

from numba import njit

from kraftcheck import Action, Invariant, Param, Permuted, Set, Spec, Symmetry, param


@njit(cache=True)
def held(s):
    """The resources some client holds (the complement of TLA+'s ``available``)."""
    h = 0
    for c in range(len(s.alloc)):
        h |= s.alloc[c]
    return h


@njit(cache=True)
def request(s, t, c, req):
    """Request(c, S): a client that owes nothing and holds nothing asks for a non-empty set."""
    if s.unsat[c] != 0 or s.alloc[c] != 0 or req == 0:
        return False
    t.unsat[c] = req
    return True


@njit(cache=True)
def allocate(s, t, c, grant):
    """Allocate(c, S): grant a non-empty part of c's request from the available resources."""
    if grant == 0 or grant & ~(s.unsat[c] & ~held(s)) != 0:
        return False
    t.alloc[c] = s.alloc[c] | grant
    t.unsat[c] = s.unsat[c] & ~grant
    return True


@njit(cache=True)
def give_back(s, t, c, back):
    """Return(c, S): c returns a non-empty set of resources it holds."""
    if back == 0 or back & ~s.alloc[c] != 0:
        return False
    t.alloc[c] = s.alloc[c] & ~back
    return True


@njit(cache=True)
def resource_mutex(s):
    """ResourceMutex: no resource is allocated to two clients."""
    for c1 in range(len(s.alloc)):
        for c2 in range(c1 + 1, len(s.alloc)):
            if s.alloc[c1] & s.alloc[c2] != 0:
                return False
    return True


@dataclass(frozen=True)
class SimpleAllocatorParams:
    clients: int = param(3, "clients (TLA+ Clients = {c1, c2, ...})", minimum=1, maximum=4)
    resources: int = param(2, "resources (TLA+ Resources = {r1, r2, ...})", minimum=1, maximum=3)


class SimpleAllocator(Spec):
    name = "simple_allocator"
    summary = "clients request, are granted and return sets of resources (TLA+ Examples' SimpleAllocator)"
    Params = SimpleAllocatorParams
    examples = ({}, {"clients": 2, "resources": 3})
    symmetric_examples = examples
    check_deadlock = True  # TLC's default: every state has a successor (the docstring says why)

    def client_names(self) -> tuple[str, ...]:
        return tuple(f"c{i + 1}" for i in range(self.params.clients))

    def resource_names(self) -> tuple[str, ...]:
        return tuple(f"r{i + 1}" for i in range(self.params.resources))

    def subset_names(self) -> tuple[str, ...]:
        names = self.resource_names()
        return tuple("{" + ",".join(names[i] for i in range(len(names)) if m >> i & 1) + "}"
                     for m in range(1 << len(names)))

    def fields(self):
        clients, resources = self.client_names(), self.resource_names()
        return [Set("unsat", resources, (len(clients),), index_labels=clients, doc="each client's outstanding request"),
                Set("alloc", resources, (len(clients),), index_labels=clients, doc="the resources each client holds")]

    def initial_states(self):
        yield {}

    def actions(self):
        c = Param("c", self.params.clients, self.client_names())
        subsets = self.subset_names()
        return [Action("Request", request, params=(c, Param("S", len(subsets), subsets))),
                Action("Allocate", allocate, params=(c, Param("S", len(subsets), subsets))),
                Action("Return", give_back, params=(c, Param("S", len(subsets), subsets)))]

    def invariants(self):
        return [Invariant("ResourceMutex", resource_mutex, resource_mutex.__doc__)]

    def symmetry(self):
        """``Permutations(Clients) \\cup Permutations(Resources)``: every field is per client and
        holds a set of resources."""
        return [Symmetry(self.client_names(), (Permuted("unsat", axes=(0,)), Permuted("alloc", axes=(0,)))),
                Symmetry(self.resource_names(), (Permuted("unsat", holds="subset"),
                                                 Permuted("alloc", holds="subset")))]
